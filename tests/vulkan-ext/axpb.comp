#version 450
// test-vulkan-ext.cpp's application shader: y[i] = x[i] * A + B for i < n, nothing else written.
// Exercises what ggml_ext_vulkan_v1.dispatch promises: storage buffers at bindings 0 and 1, the
// byte offsets the backend returns as shader_offset (passed here as push constants, in floats),
// specialization constants 0 (workgroup size) and 1 (A), push constants (n, offsets, B).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const float A = 1.0;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Params {
    uint  n;
    uint  x_offset; // shader_offset of binding 0, in floats
    uint  y_offset; // shader_offset of binding 1, in floats
    float b;
} pc;

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    y[pc.y_offset + i] = x[pc.x_offset + i] * A + pc.b;
}
