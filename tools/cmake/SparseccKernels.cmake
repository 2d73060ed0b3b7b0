# sparsecc_add_kernels: build-time kernel generation for a target.
#
#   sparsecc_add_kernels(<target>
#     [MODEL <file>]            .npz, .safetensors or .onnx: every sparse 2-D weight becomes a layer
#     [SELECT <regex>]          only layers whose name or tensor matches (sparsecc compile-model --select)
#     [N <n>]                   the batch the executors are compiled for (default: N a run-time argument)
#     [LAYER_N <regex=n>...]    a fixed N for the layers whose name or tensor matches (compile-model
#                               --layer-n; the first that matches counts), before N
#     [LAYER_N_FILE <file>]     lines "NAME,N" or "NAME N": a fixed N a layer (--layer-n-file), before
#                               LAYER_N
#     [N_FROM_SHAPES]           ONNX: each layer at the N its product has in the model's shapes, where
#                               they give one (--n-from-shapes; after LAYER_N, before N)
#     [BATCH <b>]               ONNX: the size of the model inputs' symbolic leading dimension (--batch;
#                               implies N_FROM_SHAPES)
#     [TUNING_DB <file>]        use the tuned winners recorded there (sparsecc tune)
#     [TUNE_TARGET <name>]      also add the target <name> (not built by default) that tunes every
#                               layer of MODEL on this machine's GPU into TUNING_DB (sparsecc tune
#                               --model, with the same SELECT and N); the next build then compiles
#                               the winners. `cmake --build <dir> --target <name>` runs it
#     [TUNE_OPTIONS <args...>]  further sparsecc tune options (e.g. --budget 600 --jobs 16; give it the
#                               --relu-select, --relu or --dtype of MODEL_OPTIONS, so the keys agree)
#     [CONV <weights> <spec> [<weights> <spec>]...]
#                               convolution executors: each pair runs `sparsecc compile <weights> --conv
#                               <spec>` (weights FILE[:TENSOR], a 4-D OIHW tensor or the O x I*kh*kw
#                               matrix; spec "[IxHxW or HxW],kK,sS,pP" as in docs/cli.md), one layer
#                               named by the file's stem (and _TENSOR); run with run_conv. GPU only
#     [CONV_OPTIONS <args...>]  further sparsecc compile options for every CONV (e.g. --layout nhwc --relu)
#     [SWC <files...>]          neuron morphologies: one Hines executor each, named by the file's stem
#     [RESOLUTION <p>]          compartments per SWC segment (default 1)
#     [NAMESPACE <ns>]          C++ namespace of the generated API (default <target>_kernels)
#     [OUTPUT_DIR <dir>]        where the generated files go (default <binary dir>/sparsecc/<target>)
#     [ARCH <sm_XX>]            GPU architecture of the cubins (default sm_90; PTX is kept for others)
#     [TARGET <what>]           gpu (the default), or CPU executors through LLVM: cpu (this build
#                               machine's vector ISA, = native), x86-64-avx512 or x86-64-avx2. CPU
#                               executors need a fixed N (N or LAYER_N) and are fp32 (SpMM) or f64/f32
#                               (Hines); the target then links sparsecc::runtime_cpu and the generated
#                               static library <ns>.a instead of sparsecc::runtime: no CUDA at run time
#     [MODEL_OPTIONS <args...>] further sparsecc compile-model options (e.g. --relu --values streamed)
#     [HINES_OPTIONS <args...>] further sparsecc hines options (e.g. --dtype f32)
#     [EMBED_OPTIONS <args...>] further sparsecc embed options (e.g. --strip ptx,reference: a binary
#                               about a third the size, for GPUs of the cubins' architecture only))
#
# At build time it runs `sparsecc compile-model`, `sparsecc hines` and `sparsecc embed` as one custom
# command, re-run when the model, the database, the morphologies or the generator change, and adds
# <ns>.hpp / <ns>.cpp to the target, with the folder holding them on its include path and
# sparsecc::runtime (driver API only) linked — PUBLIC for a library target, so programs that link the
# library include the header (namespace separators become '_' in the file name: a::b -> a_b.hpp). The generator is the sparsecc::sparsecc executable.
function(sparsecc_add_kernels target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "N_FROM_SHAPES"
                        "MODEL;SELECT;N;LAYER_N_FILE;BATCH;TUNING_DB;TUNE_TARGET;RESOLUTION;NAMESPACE;OUTPUT_DIR;ARCH;TARGET"
                        "LAYER_N;SWC;CONV;CONV_OPTIONS;MODEL_OPTIONS;HINES_OPTIONS;EMBED_OPTIONS;TUNE_OPTIONS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "sparsecc_add_kernels(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "sparsecc_add_kernels: ${target} is not a target")
  endif()
  if(NOT arg_MODEL AND NOT arg_SWC AND NOT arg_CONV)
    message(FATAL_ERROR "sparsecc_add_kernels(${target}): give a MODEL, SWC files, CONV pairs, or several")
  endif()
  list(LENGTH arg_CONV conv_items)
  math(EXPR conv_odd "${conv_items} % 2")
  if(conv_odd)
    message(FATAL_ERROR "sparsecc_add_kernels(${target}): CONV takes pairs <weights[:TENSOR]> <spec>, "
                        "got ${conv_items} item(s)")
  endif()
  if(arg_TUNE_TARGET AND NOT (arg_MODEL AND arg_TUNING_DB))
    message(FATAL_ERROR "sparsecc_add_kernels(${target}): TUNE_TARGET needs a MODEL and the TUNING_DB to write")
  endif()
  if(NOT TARGET sparsecc::sparsecc)
    message(FATAL_ERROR "sparsecc_add_kernels: the generator (sparsecc::sparsecc) is not known here")
  endif()

  set(ns "${target}_kernels")
  if(arg_NAMESPACE)
    set(ns "${arg_NAMESPACE}")
  endif()
  string(REPLACE "::" "_" stem "${ns}")
  set(out "${CMAKE_CURRENT_BINARY_DIR}/sparsecc/${target}")
  if(arg_OUTPUT_DIR)
    set(out "${arg_OUTPUT_DIR}")
  endif()
  set(arch sm_90)
  if(arg_ARCH)
    set(arch "${arg_ARCH}")
  endif()

  # The code's target: --arch for GPU executors, --target for CPU ones.
  set(code_target --arch ${arch})
  set(cpu_isa)
  if(arg_TARGET AND NOT arg_TARGET STREQUAL "gpu")
    if(arg_TARGET STREQUAL "cpu")
      set(cpu_isa native)
    elseif(arg_TARGET MATCHES "^(native|x86-64-avx512|x86-64-avx2)$")
      set(cpu_isa ${arg_TARGET})
    else()
      message(FATAL_ERROR "sparsecc_add_kernels(${target}): TARGET ${arg_TARGET} is none of gpu, cpu, native, "
                          "x86-64-avx512, x86-64-avx2")
    endif()
    if(arg_TUNE_TARGET)
      message(FATAL_ERROR "sparsecc_add_kernels(${target}): TUNE_TARGET tunes GPU executors, not TARGET ${arg_TARGET}")
    endif()
    if(arg_CONV)
      message(FATAL_ERROR "sparsecc_add_kernels(${target}): CONV executors are GPU executors, not TARGET ${arg_TARGET}")
    endif()
    set(code_target --target ${cpu_isa})
  endif()

  set(header "${out}/${stem}.hpp")
  set(source "${out}/${stem}.cpp")
  set(commands)
  set(depends)
  set(embed_inputs)

  # The generator: a target-level dependency when it is built here, and its file either way.
  set(generator_target sparsecc::sparsecc)
  get_target_property(aliased sparsecc::sparsecc ALIASED_TARGET)
  if(aliased)
    set(generator_target ${aliased})
  endif()
  list(APPEND depends ${generator_target} $<TARGET_FILE:sparsecc::sparsecc> ${SPARSECC_TEMPLATE_FILES})

  if(arg_MODEL)
    get_filename_component(model "${arg_MODEL}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    # The layers and their N, the same for compile-model and for the tune target (so the keys agree).
    set(layers)
    if(arg_SELECT)
      list(APPEND layers --select "${arg_SELECT}")
    endif()
    if(arg_N)
      list(APPEND layers --n ${arg_N})
    endif()
    if(arg_N_FROM_SHAPES)
      list(APPEND layers --n-from-shapes)
    endif()
    if(arg_BATCH)
      list(APPEND layers --batch ${arg_BATCH})
    endif()
    foreach(rule IN LISTS arg_LAYER_N)
      list(APPEND layers --layer-n "${rule}")
    endforeach()
    set(layer_n_file)
    if(arg_LAYER_N_FILE)
      get_filename_component(layer_n_file "${arg_LAYER_N_FILE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      list(APPEND layers --layer-n-file "${layer_n_file}")
      list(APPEND depends "${layer_n_file}")
    endif()
    set(cmd $<TARGET_FILE:sparsecc::sparsecc> compile-model "${model}" ${layers} ${code_target} -o "${out}/model")
    if(arg_TUNING_DB)
      get_filename_component(db "${arg_TUNING_DB}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      list(APPEND cmd --db "${db}")
      # A database that does not exist yet (the tune target will write it) cannot be a dependency;
      # the tune target touches a stamp instead, so the build after it compiles the winners.
      if(EXISTS "${db}")
        list(APPEND depends "${db}")
      endif()
      if(arg_TUNE_TARGET)
        set(stamp "${out}/tuning.stamp")
        if(NOT EXISTS "${stamp}")
          file(MAKE_DIRECTORY "${out}")
          file(TOUCH "${stamp}")
        endif()
        list(APPEND depends "${stamp}")
        add_custom_target(${arg_TUNE_TARGET}
          COMMAND $<TARGET_FILE:sparsecc::sparsecc> tune --model "${model}" ${layers} --db "${db}" --arch ${arch}
                  ${arg_TUNE_OPTIONS}
          COMMAND ${CMAKE_COMMAND} -E touch "${stamp}"
          DEPENDS ${generator_target} "${model}" ${layer_n_file}
          COMMENT "sparsecc: tuning the layers of ${model} into ${db}"
          USES_TERMINAL
          VERBATIM)
      endif()
    endif()
    list(APPEND cmd ${arg_MODEL_OPTIONS})
    list(APPEND commands COMMAND ${cmd})
    list(APPEND depends "${model}")
    list(APPEND embed_inputs --manifest "${out}/model/manifest.json")
  endif()

  foreach(swc IN LISTS arg_SWC)
    get_filename_component(swc_path "${swc}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(swc_stem "${swc}" NAME_WE)
    set(bundle "${out}/hines/${swc_stem}.sccb")
    set(cmd $<TARGET_FILE:sparsecc::sparsecc> hines "${swc_path}" ${code_target} -o "${bundle}")
    if(arg_RESOLUTION)
      list(APPEND cmd --resolution ${arg_RESOLUTION})
    endif()
    list(APPEND cmd ${arg_HINES_OPTIONS})
    list(APPEND commands COMMAND ${CMAKE_COMMAND} -E make_directory "${out}/hines" COMMAND ${cmd})
    list(APPEND depends "${swc_path}")
    list(APPEND embed_inputs "${bundle}")
  endforeach()

  # CONV pairs: FILE[:TENSOR] and the geometry; a spec naming an existing file is the path whole,
  # otherwise it splits at the last ':' (as sparsecc reads it).
  set(conv_index 0)
  while(conv_index LESS conv_items)
    list(GET arg_CONV ${conv_index} conv_weights)
    math(EXPR conv_next "${conv_index} + 1")
    list(GET arg_CONV ${conv_next} conv_spec)
    math(EXPR conv_index "${conv_index} + 2")
    get_filename_component(conv_path "${conv_weights}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    set(conv_tensor)
    if(NOT EXISTS "${conv_path}" AND conv_weights MATCHES "^(.+):([^:/]+)$")
      get_filename_component(conv_path "${CMAKE_MATCH_1}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      set(conv_tensor "${CMAKE_MATCH_2}")
    endif()
    get_filename_component(conv_name "${conv_path}" NAME_WE)
    set(conv_input "${conv_path}")
    if(conv_tensor)
      set(conv_input "${conv_path}:${conv_tensor}")
      string(MAKE_C_IDENTIFIER "${conv_name}_${conv_tensor}" conv_name)
    endif()
    set(bundle "${out}/conv/${conv_name}.sccb")
    list(APPEND commands COMMAND ${CMAKE_COMMAND} -E make_directory "${out}/conv"
         COMMAND $<TARGET_FILE:sparsecc::sparsecc> compile "${conv_input}" --conv "${conv_spec}" ${code_target}
                 ${arg_CONV_OPTIONS} -o "${bundle}")
    list(APPEND depends "${conv_path}")
    list(APPEND embed_inputs "${bundle}")
  endwhile()

  set(outputs "${header}" "${source}")
  if(cpu_isa)
    list(APPEND outputs "${out}/${stem}.a")  # embed writes the CPU executors' code beside the sources
  endif()
  add_custom_command(
    OUTPUT ${outputs}
    ${commands}
    COMMAND $<TARGET_FILE:sparsecc::sparsecc> embed ${embed_inputs} --name ${ns} ${arg_EMBED_OPTIONS} -o "${header}"
    DEPENDS ${depends}
    COMMENT "sparsecc: generating the kernels of ${target} (${ns})"
    VERBATIM)
  # A library target passes the generated header's folder and the runtime on to its users.
  get_target_property(type ${target} TYPE)
  set(scope PRIVATE)
  if(type MATCHES "LIBRARY$")
    set(scope PUBLIC)
  endif()
  target_sources(${target} PRIVATE "${header}" "${source}")
  target_include_directories(${target} ${scope} "${out}")
  if(cpu_isa)
    target_link_libraries(${target} ${scope} "${out}/${stem}.a" sparsecc::runtime_cpu)
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${out}/${stem}.a")
  else()
    target_link_libraries(${target} ${scope} sparsecc::runtime)
  endif()
endfunction()
