// Outputs (sparsecc/common/output.hpp): what a command may write over, checked before the work and
// again as it writes. Nothing but a regular file is replaced, never an input, temporaries never
// clobber or follow anything, several outputs land together or not at all, and a compile-model
// folder is replaced only when sparsecc wrote it.
#include "sparsecc/common/output.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "test_support.hpp"

using namespace sparsecc;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  const Bytes b = read_file(path);
  return std::string(b.begin(), b.end());
}

std::span<const unsigned char> bytes(const std::string& s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

// The message of the UsageError `f` throws ("" when it throws none).
template <typename F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return {};
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Names in `dir`, sorted.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

// A sparsecc compile-model folder: a manifest listing `files`, and those files.
void write_model_folder(const fs::path& dir, const std::vector<std::string>& files) {
  fs::create_directories(dir);
  std::string layers;
  for (const std::string& f : files) {
    layers += fmt::format("{}{{\"name\": \"{}\", \"file\": \"{}\"}}", layers.empty() ? "" : ", ", f, f);
    test::write_text((dir / f).string(), "bundle " + f);
  }
  test::write_text(
      (dir / "manifest.json").string(),
      fmt::format("{{\"format\": \"sparsecc-model-manifest\", \"version\": 1, \"layers\": [{}]}}\n", layers));
}

}  // namespace

TEST(Output, AnOutputIsNeverAnInputHoweverItIsSpelled) {
  test::TempDir dir;
  const std::string input = dir.file("x.mtx");
  test::write_text(input, "matrix");
  EXPECT_TRUE(has(usage_error([&] { check_output_file(input, {input}); }), "is the input"));
  // Another spelling of the same path.
  const std::string dotted = (dir.path() / "." / "x.mtx").string();
  EXPECT_TRUE(has(usage_error([&] { check_output_file(dotted, {input}); }), "is the input " + input));
  // A symbolic link to the input, as the output or as the input.
  fs::create_symlink(input, dir.file("link.mtx"));
  EXPECT_TRUE(has(usage_error([&] { check_output_file(dir.file("link.mtx"), {input}); }), "is the input"));
  EXPECT_TRUE(has(usage_error([&] { check_output_file(input, {dir.file("link.mtx")}); }), "is the input"));
  // A hard link.
  fs::create_hard_link(input, dir.file("hard.mtx"));
  EXPECT_TRUE(has(usage_error([&] { check_output_file(dir.file("hard.mtx"), {input}); }), "is the input"));
  // The option is named; inputs that do not exist are no obstacle.
  EXPECT_TRUE(has(usage_error([&] { check_output_file(input, {input}, "--db"); }), "--db " + input + ":"));
  EXPECT_NO_THROW(check_output_file(dir.file("new.sccb"), {input, dir.file("missing.npz"), ""}));
  EXPECT_NO_THROW(check_output_file(dir.file("other.sccb"), {input}));
  EXPECT_EQ(slurp(input), "matrix");
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"hard.mtx", "link.mtx", "x.mtx"}));
}

TEST(Output, OnlyARegularFileIsEverReplaced) {
  test::TempDir dir;
  // A device (checked, never written here), a FIFO, a socket, a folder, and links to them.
  EXPECT_TRUE(has(usage_error([] { check_output_file("/dev/null", {}); }), "is a character device"));
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(
      has(usage_error([&] { check_output_file(fifo, {}); }), "is a FIFO (named pipe), not a regular file"));
  EXPECT_TRUE(has(usage_error([&] { write_output_file(fifo, bytes("x")); }), "is a FIFO"));
  EXPECT_TRUE(has(usage_error([&] { write_file_atomic(fifo, std::string_view("x")); }), "is a FIFO"));
  EXPECT_TRUE(is_fifo(fifo));
  fs::create_symlink(fifo, dir.file("to_pipe"));
  EXPECT_TRUE(
      has(usage_error([&] { write_output_file(dir.file("to_pipe"), bytes("x")); }), "symbolic link to"));
  EXPECT_TRUE(is_fifo(fifo));
  EXPECT_TRUE(fs::is_symlink(dir.file("to_pipe")));
  fs::create_symlink("/dev/null", dir.file("to_null"));
  EXPECT_TRUE(has(usage_error([&] { check_output_file(dir.file("to_null"), {}); }), "a character device"));

  const std::string sock = dir.file("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_TRUE(has(usage_error([&] { write_output_file(sock, bytes("x")); }), "is a socket"));
  ::close(fd);
  EXPECT_EQ(fs::status(sock).type(), fs::file_type::socket);

  fs::create_directory(dir.file("folder"));
  EXPECT_TRUE(has(usage_error([&] { write_output_file(dir.file("folder"), bytes("x")); }), "is a folder"));
  EXPECT_TRUE(fs::is_empty(dir.file("folder")));
  EXPECT_TRUE(has(usage_error([&] { check_output_file(dir.file("folder") + "/", {}); }), "give a file name"));

  // A link that leads nowhere is refused; a link to a regular file writes that file, and stays.
  fs::create_symlink(dir.file("nothing"), dir.file("dangling"));
  EXPECT_TRUE(
      has(usage_error([&] { write_output_file(dir.file("dangling"), bytes("x")); }), "leads nowhere"));
  EXPECT_FALSE(fs::exists(dir.file("nothing")));
  test::write_text(dir.file("target.txt"), "old");
  fs::create_symlink(dir.file("target.txt"), dir.file("to_target"));
  write_output_file(dir.file("to_target"), bytes("new"));
  EXPECT_TRUE(fs::is_symlink(dir.file("to_target")));
  EXPECT_EQ(slurp(dir.file("target.txt")), "new");
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"dangling", "folder", "pipe", "sock", "target.txt",
                                                           "to_null", "to_pipe", "to_target"}));
}

TEST(Output, PathProblemsAreNamedBeforeTheWork) {
  test::TempDir dir;
  EXPECT_TRUE(has(usage_error([] { check_output_file("", {}); }), "the output path is empty"));
  EXPECT_TRUE(
      has(usage_error([&] { check_output_file(dir.file("nofolder/out.sccb"), {}); }),
          "-o " + dir.file("nofolder/out.sccb") + ": folder " + dir.file("nofolder") + " does not exist"));
  EXPECT_TRUE(has(usage_error([&] { check_output_file(dir.file("a/b/c/out.sccb"), {}); }), "does not exist"));
  test::write_text(dir.file("file.txt"), "x");
  EXPECT_TRUE(has(usage_error([&] { check_output_file(dir.file("file.txt/out.sccb"), {}); }),
                  dir.file("file.txt") + " is not a folder"));
  EXPECT_TRUE(has(usage_error([&] { check_output_file(dir.file("file.txt/deeper/out.sccb"), {}); }),
                  dir.file("file.txt") + " is not a folder"));
  EXPECT_TRUE(
      has(usage_error([&] { write_file_atomic(dir.file("nofolder/out.txt"), std::string_view("x")); }),
          "does not exist"));
  // A folder that takes no new files (permission bits do not stop root, who is then not asked).
  fs::create_directory(dir.file("ro"));
  ::chmod(dir.file("ro").c_str(), 0555);
  if (::access(dir.file("ro").c_str(), W_OK) != 0) {
    EXPECT_TRUE(has(usage_error([&] { check_output_file(dir.file("ro/out.sccb"), {}); }),
                    "cannot create files in folder " + dir.file("ro")));
    EXPECT_TRUE(fs::is_empty(dir.file("ro")));
  } else {
    RecordProperty("read_only_folder_checked", "no (root)");
  }
  ::chmod(dir.file("ro").c_str(), 0755);
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"file.txt", "ro"}));
}

TEST(Output, TemporariesAreFreshAndNeverFollowALink) {
  test::TempDir dir;
  const std::string out = dir.file("out.sccb");
  // What sat at the temporary's former name (out.sccb.tmp.PID): a file and a link to a victim.
  test::write_text(dir.file("victim.txt"), "victim");
  const std::string old_tmp = fmt::format("{}.tmp.{}", out, static_cast<long>(::getpid()));
  fs::create_symlink(dir.file("victim.txt"), old_tmp);
  write_file_atomic(out, std::string_view("first"));
  EXPECT_EQ(slurp(out), "first");
  EXPECT_EQ(slurp(dir.file("victim.txt")), "victim");
  EXPECT_TRUE(fs::is_symlink(old_tmp));
  // An existing output keeps its permission bits.
  ::chmod(out.c_str(), 0640);
  write_output_file(out, bytes("second"));
  EXPECT_EQ(slurp(out), "second");
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::mask,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(listing(dir.path()),
            (std::vector<std::string>{"out.sccb", fs::path(old_tmp).filename().string(), "victim.txt"}));
}

TEST(Output, CommitLooksAgainAndSeveralOutputsLandTogether) {
  test::TempDir dir;
  // Between the write and the rename a FIFO appears at the destination: it stays.
  {
    StagedOutput staged(dir.file("late"), bytes("x"));
    ASSERT_EQ(::mkfifo(dir.file("late").c_str(), 0600), 0);
    EXPECT_TRUE(has(usage_error([&] { staged.commit(); }), "is now a FIFO"));
  }
  EXPECT_TRUE(is_fifo(dir.file("late")));
  ::unlink(dir.file("late").c_str());
  // An uncommitted output leaves nothing behind.
  { StagedOutput staged(dir.file("never"), bytes("x")); }
  EXPECT_TRUE(fs::is_empty(dir.path()));

  // Both or neither: the second destination turns into a folder before the commit, so the first is
  // put back as it was.
  test::write_text(dir.file("a.cpp"), "old source");
  {
    StagedOutput a(dir.file("a.cpp"), bytes("new source"));
    StagedOutput b(dir.file("a.hpp"), bytes("new header"));
    fs::create_directory(dir.file("a.hpp"));
    StagedOutput* const both[] = {&a, &b};
    EXPECT_THROW(commit_outputs(both), UsageError);
  }
  EXPECT_EQ(slurp(dir.file("a.cpp")), "old source");
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"a.cpp", "a.hpp"}));
  fs::remove(dir.file("a.hpp"));
  // A new first file is removed again.
  {
    StagedOutput a(dir.file("b.cpp"), bytes("new source"));
    StagedOutput b(dir.file("b.hpp"), bytes("new header"));
    ASSERT_EQ(::mkfifo(dir.file("b.hpp").c_str(), 0600), 0);
    StagedOutput* const both[] = {&a, &b};
    EXPECT_THROW(commit_outputs(both), UsageError);
  }
  EXPECT_FALSE(fs::exists(dir.file("b.cpp")));
  ::unlink(dir.file("b.hpp").c_str());
  {
    StagedOutput a(dir.file("a.cpp"), bytes("new source"));
    StagedOutput b(dir.file("a.hpp"), bytes("new header"));
    StagedOutput* const both[] = {&a, &b};
    commit_outputs(both);
  }
  EXPECT_EQ(slurp(dir.file("a.cpp")), "new source");
  EXPECT_EQ(slurp(dir.file("a.hpp")), "new header");
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"a.cpp", "a.hpp"}));
}

TEST(Output, OnlyAFolderSparseccWroteIsReplaced) {
  test::TempDir dir;
  const fs::path out = dir.path() / "model";
  EXPECT_EQ(check_output_folder(out.string(), {}), OutputFolder::absent);
  fs::create_directory(out);
  EXPECT_EQ(check_output_folder(out.string(), {}), OutputFolder::empty);
  EXPECT_EQ(check_output_folder(out.string() + "/", {}), OutputFolder::empty);
  write_model_folder(out, {"000_fc1.sccb", "001_fc2.sccb"});
  EXPECT_EQ(model_folder_problem(out.string()), "");
  EXPECT_EQ(check_output_folder(out.string(), {}), OutputFolder::ours);

  const auto refused = [&](const fs::path& folder, const std::string& why) {
    const std::string e = usage_error([&] { check_output_folder(folder.string(), {}); });
    EXPECT_TRUE(has(e, "did not write") && has(e, why)) << e;
  };
  // A user's folder with a file named manifest.json, whatever it holds.
  const fs::path fake = dir.path() / "fake";
  fs::create_directory(fake);
  test::write_text((fake / "manifest.json").string(), "{\"layers\": []}");
  refused(fake, "not a sparsecc model manifest");
  test::write_text((fake / "manifest.json").string(), "my notes");
  refused(fake, "not a sparsecc model manifest");
  test::write_text((fake / "manifest.json").string(),
                   "{\"format\": \"sparsecc-model-manifest\", \"version\": 2, \"layers\": []}");
  refused(fake, "not a sparsecc model manifest");
  test::write_text((fake / "manifest.json").string(), std::string(100000, '[') + std::string(100000, ']'));
  refused(fake, "not a sparsecc model manifest");
  test::write_text(
      (fake / "manifest.json").string(),
      "{\"format\": \"sparsecc-model-manifest\", \"version\": 1, \"layers\": [{\"file\": \"../x\"}]}");
  refused(fake, "not a plain file name");
  fs::remove(fake / "manifest.json");
  test::write_text((fake / "notes.txt").string(), "mine");
  refused(fake, "no manifest.json");
  // Ours, but with something else beside: a file, a folder, or a listed name that is a link.
  const fs::path extra = dir.path() / "extra";
  write_model_folder(extra, {"000_a.sccb"});
  test::write_text((extra / "notes.txt").string(), "mine");
  refused(extra, "notes.txt, which its manifest.json does not list");
  fs::remove(extra / "notes.txt");
  fs::create_directory(extra / "sub");
  refused(extra, "sub");
  fs::remove(extra / "sub");
  fs::remove(extra / "000_a.sccb");
  fs::create_symlink(dir.file("fake/notes.txt"), extra / "000_a.sccb");
  refused(extra, "000_a.sccb is a symbolic link");
  // A symbolic link to a folder, and a file, are not output folders.
  fs::create_directory_symlink(out, dir.path() / "link");
  EXPECT_TRUE(has(usage_error([&] { check_output_folder(dir.file("link"), {}); }), "symbolic link"));
  EXPECT_TRUE(has(usage_error([&] { check_output_folder(dir.file("fake/notes.txt"), {}); }), "not a folder"));
  // A folder holding an input of the command.
  EXPECT_TRUE(has(usage_error([&] { check_output_folder(out.string(), {(out / "manifest.json").string()}); }),
                  "holds the input"));
  // Its parent folder must exist.
  EXPECT_TRUE(has(usage_error([&] { check_output_folder(dir.file("none/model"), {}); }), "does not exist"));
  EXPECT_EQ(slurp((fake / "notes.txt").string()), "mine");

  // Removed file by file: the folder goes when nothing else appeared in it.
  remove_model_folder(out.string());
  EXPECT_FALSE(fs::exists(out));
  EXPECT_THROW(remove_model_folder(fake.string()), std::runtime_error);
  EXPECT_TRUE(fs::exists(fake / "notes.txt"));
}

TEST(Output, StagingAndSwappingNeverReplaceAnything) {
  test::TempDir dir;
  const std::string out = dir.file("model");
  const std::string a = make_staging_folder(out);
  const std::string b = make_staging_folder(out + "/");
  EXPECT_NE(a, b);
  EXPECT_TRUE(fs::is_directory(a) && fs::is_empty(a));
  EXPECT_EQ(fs::path(a).parent_path(), dir.path());
  test::write_text(a + "/kept", "x");
  EXPECT_THROW(rename_without_replacing(b, a), std::runtime_error);
  EXPECT_TRUE(fs::exists(a + "/kept"));
  rename_without_replacing(b, out);
  EXPECT_TRUE(fs::is_directory(out));
  const std::string aside = move_aside(out);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_directory(aside));
  EXPECT_TRUE(has(fs::path(aside).filename().string(), ".model.old."));
}
