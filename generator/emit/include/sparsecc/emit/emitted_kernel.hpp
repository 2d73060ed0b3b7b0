// What an emitter hands the compile driver: kernel text in one of two languages, the entry's name,
// and the packed value array a streamed-mode kernel reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparsecc {

enum class KernelLanguage { cuda, ptx };  // CUDA C++ for NVRTC, or PTX for the assembler

struct EmittedKernel {
  KernelLanguage language = KernelLanguage::cuda;
  std::string source;  // CUDA C++ or PTX text: one self-contained module
  // PTX only, may be empty: the same kernel as `source` cut into modules that are assembled
  // separately and linked (the entry first, then modules of .visible .func case functions it calls).
  // The assembler's time grows faster than linearly with the size of one module, so large kernels
  // assemble through these; `source` stays the one-module form the bundle carries for driver JIT.
  std::vector<std::string> modules;
  std::string kernel_name;         // the extern "C" / .entry symbol
  std::int32_t max_registers = 0;  // register cap for the assembler (-maxrregcount); 0: none
  std::int32_t opt_level = 3;      // ptxas -O level
  std::vector<float>
      packed_values;  // the `values` argument (streamed values, rolled step table); empty when baked
  std::vector<std::uint32_t> fragment_words;  // the `fragments` argument of tensor-core plans; else empty
};

// "cuda" / "ptx"; parse_kernel_language throws UsageError on another word.
const char* to_string(KernelLanguage language);
KernelLanguage parse_kernel_language(const std::string& word);

// True for a C identifier (what both languages accept as an entry name).
bool is_c_identifier(const std::string& s);

}  // namespace sparsecc
