// Outputs: the one place that decides what a command may write over. Every command that writes
// checks its outputs here before its work, and writes them through here, so the rules hold for all:
//  - an output replaces nothing but a regular file: never a folder, a device, a FIFO or a socket (a
//    symbolic link is followed to the regular file it names, which is replaced; the link stays);
//  - an output is never one of the command's inputs, compared by file identity (device and inode),
//    so another spelling of the path, a symbolic link or a hard link to the input is caught;
//  - its folder exists and takes new files;
//  - it is written to a fresh temporary beside it (created exclusively, never through a link at the
//    temporary's name) and renamed into place, so a failure leaves what was there.
// A compile-model output folder is replaced only when it is empty or sparsecc wrote it: it holds a
// model manifest and the bundle files that manifest lists, and nothing else.
// Problems with an output path throw UsageError "OPTION PATH: why" (the CLI's exit status 2).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sparsecc {

// The format and version keys of the manifest.json that `sparsecc compile-model` writes.
inline constexpr std::string_view kModelManifestFormat = "sparsecc-model-manifest";
inline constexpr std::int64_t kModelManifestVersion = 1;
// A manifest larger than this is not one sparsecc wrote (a model's manifest takes about 1 KiB a layer).
inline constexpr std::uint64_t kMaxModelManifestBytes = std::uint64_t{64} << 20;

// Checks, before the work, that `path` (given with `option`, e.g. "-o") can take an output file: not
// empty, not an existing folder, device, FIFO or socket (nor a link to one), not the same file as any
// of `inputs` (paths that do not exist are skipped), and in an existing folder where a new file can
// be created (tried with a temporary that is removed at once). Throws UsageError naming the path.
void check_output_file(const std::string& path, const std::vector<std::string>& inputs,
                       std::string_view option = "-o");

// The file an output named `path` replaces: the regular file a symbolic link names, or `path`
// itself (also when nothing is there yet). Throws UsageError when `path` is anything but a regular
// file, a link to one, or nothing.
std::string output_destination(const std::string& path, std::string_view option = {});

// One output written to a fresh temporary beside its destination (created with O_EXCL, so it never
// replaces or follows anything at that name), flushed to disk, and waiting to be renamed into place
// by commit(). An existing destination's permission bits are kept. Destroyed uncommitted, the
// temporary is removed.
class StagedOutput {
 public:
  StagedOutput(const std::string& path, std::span<const unsigned char> data, std::string_view option = {});
  ~StagedOutput();
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;

  // Renames the temporary over the destination, checking again that the destination is a regular
  // file or nothing (and, when it was nothing, never replacing what appeared there meanwhile).
  void commit();

  const std::string& path() const { return path_; }                // as given
  const std::string& destination() const { return destination_; }  // what is replaced
  const std::string& temporary() const { return temporary_; }

 private:
  std::string path_, option_, destination_, temporary_;
  bool committed_ = false;
};

// Renames several staged outputs into place: all of them, or none (the files replaced before a
// failure are put back).
void commit_outputs(std::span<StagedOutput* const> outputs);

// Stages and commits one output (write_file_atomic writes through this).
void write_output_file(const std::string& path, std::span<const unsigned char> data,
                       std::string_view option = {});

// An output folder as check_output_folder finds it.
enum class OutputFolder {
  absent,  // nothing there: it is created
  empty,   // an empty folder: it is replaced
  ours,    // written by sparsecc compile-model: it is replaced
};

// Checks, before the work, that `path` can take a compile-model output folder: nothing there, an
// empty folder, or a folder sparsecc wrote (model_folder_problem() finds nothing foreign in it), in
// an existing folder where a new one can be created, and holding none of `inputs`. Throws
// UsageError naming the path and what is foreign.
OutputFolder check_output_folder(const std::string& path, const std::vector<std::string>& inputs,
                                 std::string_view option = "-o");

// Why the existing folder `path` is not one sparsecc compile-model wrote, or "" when it is: its
// manifest.json parses as a model manifest (format and version keys) listing plain file names, and
// every entry of the folder is manifest.json or a file it lists, each a regular file (no folders,
// links or other files).
std::string model_folder_problem(const std::string& path);

// Removes a folder model_folder_problem() accepts: the files its manifest lists, the manifest, then
// the folder (which fails, leaving it, when anything else appeared in it). Throws on failure.
void remove_model_folder(const std::string& path);

// Creates a fresh, empty folder beside `path` named ".NAME.tmp.PID.N" (mkdir, so never one that
// exists) and returns its path.
std::string make_staging_folder(const std::string& path);

// Renames `from` to `to` when nothing is at `to`; never replaces anything. Throws on failure.
void rename_without_replacing(const std::string& from, const std::string& to);

// Renames `path` to a fresh name beside it, ".NAME.old.PID.N" (never replacing anything), and returns
// that name.
std::string move_aside(const std::string& path);

}  // namespace sparsecc
