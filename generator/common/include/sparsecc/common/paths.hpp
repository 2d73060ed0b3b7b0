// Paths named inside a user's file (a model manifest's layer files) and the folder they must stay in.
#pragma once

#include <filesystem>
#include <string>

namespace sparsecc {

// Why `entry`, a path written in a file that lives in `folder`, does not lead to a file inside that
// folder (its subfolders included), or "" when it does. Refused: an empty path, a NUL byte, an
// absolute path, ".." components that climb above `folder`, and a path whose canonical form
// (symbolic links followed, as far as the path exists) is not inside `folder`'s canonical form.
std::string path_outside_folder(const std::filesystem::path& folder, const std::string& entry);

}  // namespace sparsecc
