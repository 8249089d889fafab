# AArch64 kernel files: the instruction-set level of a kernel file is in its name, and only that
# file is compiled for it, so nothing outside the runtime-checked kernels can use an instruction
# the CPU may lack (cpu-isa.h; scripts/test-qemu-aarch64.sh runs the suite as a plain-NEON CPU to
# prove it):
#   *-neon.cpp     baseline ARMv8-A (Advanced SIMD is part of it): no extra flag
#   *-dotprod.cpp  + SDOT/UDOT, FP16 arithmetic (ARMv8.2-A)
#   *-i8mm.cpp     + SMMLA/UMMLA and BF16 (ARMv8.6-A)
# Such files must hold only the kernels of that level (no shared inline code a lower level could
# end up calling) and are only called after ggml_cpu_isa_allows() / the isa service says yes.
# On other architectures the files compile to nothing (their bodies are under #if __aarch64__).
function(sd_arm_kernel_flags)
    if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
        return()
    endif()
    foreach(f IN LISTS ARGN)
        if(f MATCHES "-dotprod\\.cpp$")
            set_property(SOURCE ${f} APPEND PROPERTY COMPILE_OPTIONS -march=armv8.2-a+dotprod+fp16)
        elseif(f MATCHES "-i8mm\\.cpp$")
            set_property(SOURCE ${f} APPEND PROPERTY COMPILE_OPTIONS -march=armv8.2-a+dotprod+fp16+i8mm+bf16)
        endif()
    endforeach()
endfunction()
