// Toolchain self-check skeleton: an elementwise kernel whose name and body are insertion points.
// The text between the markers is the default that keeps this file compilable on its own
// (nvcc -arch=sm_90 -c templates/toolchain_check.cu); the emitter replaces it.
//   KERNEL_NAME  the extern "C" symbol the runtime looks up
//   BODY         an expression of x[i] assigned to y[i]
extern "C" __global__ void /*@KERNEL_NAME*/sparsecc_toolchain_check/*@end*/(
    const float* __restrict__ x, float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = /*@BODY*/2.0f * v + 1.0f/*@end*/;
  }
}
