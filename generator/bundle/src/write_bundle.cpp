#include "sparsecc/bundle/write_bundle.hpp"

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"

namespace sparsecc {

void write_bundle(const std::string& path, const rt::Bundle& bundle) {
  if (path.ends_with(".gz")) throw UsageError(path + ": bundles are not compressed; drop the .gz suffix");
  write_file_atomic(path, rt::bundle_bytes(bundle, path));
}

}  // namespace sparsecc
