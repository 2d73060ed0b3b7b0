// Kernel skeletons live in templates/ as real .cu files that compile on their own. An insertion
// point is a comment of the form  /*@NAME*/ ... /*@end*/  (the default text between the markers
// keeps the skeleton compilable) or a lone  /*@NAME@*/  marker. Emitters fill the points by name;
// rendering fails when a point is left unfilled or a value names no point.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace sparsecc {

class KernelTemplate {
 public:
  // Parses template text; `name` is used in error messages. Throws UsageError on malformed markers.
  KernelTemplate(std::string name, std::string text);
  // Loads templates/<file> from the project's template folder (or from `dir` when given).
  static KernelTemplate load(const std::string& file, const std::string& dir = {});

  // Names of the insertion points, in order of appearance (each name once).
  std::vector<std::string> points() const;

  // Replaces every insertion point with its value. Deterministic: same values, same bytes.
  std::string render(const std::map<std::string, std::string>& values) const;

  const std::string& name() const { return name_; }

 private:
  struct Piece {
    bool is_point = false;
    std::string text;  // literal text, or the point's name
  };
  std::string name_;
  std::vector<Piece> pieces_;
};

// Where the kernel templates are: $SPARSECC_TEMPLATE_DIR when set; else, for an installed program,
// share/sparsecc/templates beside the bin/ folder holding the running executable; else the source
// tree's templates/ the build configured.
std::string template_dir();

}  // namespace sparsecc
