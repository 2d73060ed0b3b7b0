// The tuning database: a JSON file of per-matrix tuning results, keyed by what a result is valid for
// (operation, matrix fingerprint, operation parameters, GPU, generator version). The tuner records
// every candidate's timing so a result can be inspected, or used to train the predictor, later.
//
// File format (schema 1), pretty-printed:
//   {"schema": 1, "generator": "<kVersion that wrote it>", "records": [<record>, ...]}
// Non-finite doubles are written as null and read back as NaN. Unknown fields are ignored, so later
// versions of schema 1 may add fields; a file with a higher schema number is never read or replaced.
//
// A damaged database is a lost cache, not an error: loading reports it as a warning and carries on
// with an empty database. Updates are safe against concurrent writers (threads and processes on
// one machine): they serialize on an advisory flock() of "<path>.lock" and replace the file with an
// atomic rename, so readers see either the old or the new file, never a partial one.
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace sparsecc::tune {

// The "schema" field this version writes and the highest it reads.
inline constexpr int kTuningDbSchema = 1;

// What a tuning result is valid for. Two keys match when every field is equal (params compared as
// JSON values, so key order does not matter and 4 equals 4.0).
struct TuningKey {
  std::string op;                                    // "spmm" or "hines"
  std::string fingerprint;                           // the matrix / morphology fingerprint (hex)
  nlohmann::json params = nlohmann::json::object();  // operation parameters (m, k, n, n_mode, dtype, ...)
  std::string gpu;                                   // device name, e.g. "NVIDIA H100 80GB HBM3"
  std::string compute_capability;                    // "9.0"
  std::string generator_version;                     // kVersion when recorded
  bool operator==(const TuningKey& other) const;
};

// Canonical one-line text of a key, deterministic (strings JSON-quoted, params dumped with sorted
// keys); for logs, messages and as a map key.
std::string key_string(const TuningKey& key);

// One candidate as timed. median_us is NaN when it failed (compile error, verification failure...).
struct CandidateTiming {
  std::string label;                                   // e.g. "R4/T64/G1/equal/baked/ptx"
  nlohmann::json options = nlohmann::json::object();   // the plan options that reproduce it
  nlohmann::json features = nlohmann::json::object();  // predictor features, name -> number (may be empty)
  double median_us = std::numeric_limits<double>::quiet_NaN();
  double rel_error = std::numeric_limits<double>::quiet_NaN();
  bool verified = false;
  double compile_seconds = 0;
  std::string error;  // why it failed; empty otherwise
};

struct TuningRecord {
  TuningKey key;
  std::string winner;  // label of the fastest verified candidate
  nlohmann::json winner_options = nlohmann::json::object();
  double winner_us = std::numeric_limits<double>::quiet_NaN();
  // The default (untuned) plan's time; NaN if not measured.
  double default_us = std::numeric_limits<double>::quiet_NaN();
  std::string strategy;  // "exhaustive", "predictor+local", ...
  double tuning_seconds = 0;
  std::string recorded_at;               // UTC ISO-8601 (see utc_timestamp)
  std::vector<CandidateTiming> timings;  // every candidate tried
};

// Records with pairwise distinct keys (put keeps it so).
struct TuningDatabase {
  std::vector<TuningRecord> records;
  // The record for `key`, or nullptr. The pointer is invalidated by put().
  const TuningRecord* find(const TuningKey& key) const;
  // Replaces the record with the same key, else appends.
  void put(TuningRecord r);
};

// The current time as UTC ISO-8601 to the second, e.g. "2025-03-01T12:34:56Z".
std::string utc_timestamp();

nlohmann::json to_json(const TuningKey& key);
nlohmann::json to_json(const CandidateTiming& t);
nlohmann::json to_json(const TuningRecord& r);
nlohmann::json to_json(const TuningDatabase& db);  // the whole file, "schema" and "generator" included

// Reads a whole database file's JSON. Throws InputError naming `name` and the JSON path of the first
// bad field ("records[3].key.gpu: expected a string, found number"); a schema other than
// kTuningDbSchema is an error too. Required: schema, records, and in each record key (all six fields),
// winner and timings, and each timing's label; other fields default as in the structs. Records with
// equal keys collapse to the last one.
TuningDatabase database_from_json(const nlohmann::json& j, const std::string& name);

// A database file's text, as load_database reads it (size and nesting limits of
// common/json_input.hpp included, kMaxTuningDatabaseBytes for the size), named `name` in errors.
// Throws InputError for every problem load_database reports as a warning.
TuningDatabase parse_database(std::string_view text, const std::string& name);

// Reads the database at `path` for a command that only reads it (a lookup, a fit): a missing file is an
// empty database; every problem that load_database reports as a warning throws InputError naming the
// file instead, so a database the user named is never silently ignored.
TuningDatabase read_database_file(const std::string& path);

// Loads the database at `path`. A missing file is an empty database, without a warning. A file that
// cannot be read, is over kMaxTuningDatabaseBytes (common/json_input.hpp: such a file is not read,
// and update_database refuses to replace it), is not JSON, nests deeper than kMaxJsonDepth, has the
// wrong or a newer schema, or holds a bad record yields an empty database and one warning sentence
// naming the file (and the byte offset of a JSON syntax error) appended to *warnings; it never throws
// for the file's content or for I/O errors.
TuningDatabase load_database(const std::string& path, std::vector<std::string>* warnings = nullptr);

// Merges `records` into the file at `path` (same key: the new record replaces the stored one):
//  1. takes an exclusive flock() on "<path>.lock" (created if needed, never removed);
//  2. re-reads the current file; one that is not a database (not JSON, wrong schema number below the
//     current, bad records) throws InputError naming the path and is left as it was;
//  3. writes the merged database to a uniquely named temporary in the same directory, fsyncs it and
//     renames it over `path` (keeping the old file's permission bits);
//  4. releases the lock.
// Never leaves a partial file and never touches the existing file on failure. Throws
// std::runtime_error naming the path when the lock, the temporary or the rename fails, and InputError
// naming the path when the existing file cannot be read (a directory, no permission) or was written
// with a newer schema — those are not overwritten, since they may hold results this version cannot
// see. flock is advisory and may not work across machines on network file systems.
void update_database(const std::string& path, const std::vector<TuningRecord>& records,
                     std::vector<std::string>* warnings = nullptr);

}  // namespace sparsecc::tune
