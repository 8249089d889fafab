// ggml-backend.cpp — the generic front of the backend interface: thin wrappers that forward to
// the vtables of ggml-backend-impl.h (supplying the defaults for optional hooks), tensor data
// transfer, and allocation of a whole context's tensors into backend buffers.

#include "backend/ggml-backend-impl.h"
#include "ggml-alloc.h"
#include "ext/ggml-ext-impl.h"
#include "ggml-impl.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

// =============================================================================================
// Buffer types

const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft) {
    GGML_ASSERT(buft != nullptr);
    return buft->iface.get_name(buft);
}

ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    GGML_ASSERT(buft != nullptr);
    if (size == 0) {
        // a zero-size buffer has no storage; backends need not handle size 0 themselves
        return ggml_backend_buffer_init(buft, {}, nullptr, 0);
    }
    return buft->iface.alloc_buffer(buft, size);
}

size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft) {
    return buft->iface.get_alignment(buft);
}

size_t ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft) {
    if (buft->iface.get_max_size) {
        return buft->iface.get_max_size(buft);
    }
    return SIZE_MAX;
}

size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor * tensor) {
    if (buft->iface.get_alloc_size) {
        size_t size = buft->iface.get_alloc_size(buft, tensor);
        GGML_ASSERT(size >= ggml_nbytes(tensor));
        return size;
    }
    return ggml_nbytes(tensor);
}

bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft) {
    if (buft->iface.is_host) {
        return buft->iface.is_host(buft);
    }
    return false;
}

ggml_backend_dev_t ggml_backend_buft_get_device(ggml_backend_buffer_type_t buft) {
    return buft->device;
}

// =============================================================================================
// Buffers

ggml_backend_buffer_t ggml_backend_buffer_init(ggml_backend_buffer_type_t buft, struct ggml_backend_buffer_i iface,
                                               void * context, size_t size) {
    ggml_backend_buffer_t buffer = new ggml_backend_buffer{
        /* .iface   = */ iface,
        /* .buft    = */ buft,
        /* .context = */ context,
        /* .size    = */ size,
        /* .usage   = */ GGML_BACKEND_BUFFER_USAGE_ANY,
    };
    return buffer;
}

const char * ggml_backend_buffer_name(ggml_backend_buffer_t buffer) {
    return ggml_backend_buft_name(ggml_backend_buffer_get_type(buffer));
}

void ggml_backend_buffer_free(ggml_backend_buffer_t buffer) {
    if (buffer == nullptr) {
        return;
    }
    if (buffer->iface.free_buffer != nullptr) {
        buffer->iface.free_buffer(buffer);
    }
    delete buffer;
}

void * ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer) {
    GGML_ASSERT(buffer != nullptr);
    if (buffer->size == 0) {
        return nullptr;
    }
    void * base = buffer->iface.get_base(buffer);
    GGML_ASSERT(base != nullptr && "backend buffer base cannot be NULL");
    return base;
}

size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer) {
    GGML_ASSERT(buffer != nullptr);
    return buffer->size;
}

enum ggml_status ggml_backend_buffer_init_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor) {
    if (buffer->iface.init_tensor) {
        return buffer->iface.init_tensor(buffer, tensor);
    }
    return GGML_STATUS_SUCCESS;
}

size_t ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer) {
    return ggml_backend_buft_get_alignment(ggml_backend_buffer_get_type(buffer));
}

size_t ggml_backend_buffer_get_max_size(ggml_backend_buffer_t buffer) {
    return ggml_backend_buft_get_max_size(ggml_backend_buffer_get_type(buffer));
}

size_t ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t buffer, const struct ggml_tensor * tensor) {
    return ggml_backend_buft_get_alloc_size(ggml_backend_buffer_get_type(buffer), tensor);
}

void ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    // zero-size buffers have no storage (and may lack a clear hook)
    if (buffer->size == 0 || buffer->iface.clear == nullptr) {
        return;
    }
    buffer->iface.clear(buffer, value);
}

bool ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer) {
    return ggml_backend_buft_is_host(ggml_backend_buffer_get_type(buffer));
}

static bool ggml_backend_buffer_is_multi_buffer(ggml_backend_buffer_t buffer);
static void ggml_backend_multi_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage);

void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage) {
    buffer->usage = usage;
    // the scheduler reads the usage of the buffer a tensor actually lives in, i.e. the parts
    if (ggml_backend_buffer_is_multi_buffer(buffer)) {
        ggml_backend_multi_buffer_set_usage(buffer, usage);
    }
}

enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer) {
    return buffer->usage;
}

ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer) {
    GGML_ASSERT(buffer != nullptr);
    return buffer->buft;
}

void ggml_backend_buffer_reset(ggml_backend_buffer_t buffer) {
    if (buffer->iface.reset) {
        buffer->iface.reset(buffer);
    }
}

enum ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor, void * addr) {
    GGML_ASSERT(buffer != nullptr && tensor != nullptr);
    GGML_ASSERT(tensor->buffer == nullptr && "tensor already has a buffer");
    GGML_ASSERT(tensor->data == nullptr && "tensor already has data");
    GGML_ASSERT(tensor->view_src == nullptr && "views are initialised with ggml_backend_view_init");
    GGML_ASSERT(addr != nullptr);
    char * base = (char *) ggml_backend_buffer_get_base(buffer);
    GGML_ASSERT(base != nullptr && "cannot place a tensor in a zero-size buffer");
    GGML_ASSERT((char *) addr >= base &&
                (char *) addr + ggml_backend_buffer_get_alloc_size(buffer, tensor) <= base + buffer->size &&
                "tensor does not fit in the buffer");

    tensor->buffer = buffer;
    tensor->data   = addr;
    return ggml_backend_buffer_init_tensor(buffer, tensor);
}

enum ggml_status ggml_backend_view_init(struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor != nullptr);
    GGML_ASSERT(tensor->buffer == nullptr && "view already initialised");
    GGML_ASSERT(tensor->view_src != nullptr && "not a view");
    GGML_ASSERT(tensor->view_src->buffer != nullptr && "view source has no buffer");
    GGML_ASSERT(tensor->view_src->data != nullptr && "view source has no data");

    tensor->buffer = tensor->view_src->buffer;
    tensor->data   = (char *) tensor->view_src->data + tensor->view_offs;
    return ggml_backend_buffer_init_tensor(tensor->buffer, tensor);
}

// =============================================================================================
// Multi-buffer: several buffers of one type presented as one, so that a context whose tensors
// exceed the type's max size can still be handed back as a single handle.

namespace {

struct multi_buffer_context {
    std::vector<ggml_backend_buffer_t> buffers;
};

void multi_buffer_free(ggml_backend_buffer_t buffer) {
    auto * ctx = (multi_buffer_context *) buffer->context;
    for (ggml_backend_buffer_t b : ctx->buffers) {
        ggml_backend_buffer_free(b);
    }
    delete ctx;
}

// Only meaningful as "some base": the parts are not contiguous.
void * multi_buffer_get_base(ggml_backend_buffer_t buffer) {
    auto * ctx = (multi_buffer_context *) buffer->context;
    for (ggml_backend_buffer_t b : ctx->buffers) {
        if (b->size > 0) {
            return ggml_backend_buffer_get_base(b);
        }
    }
    return nullptr;
}

void multi_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    auto * ctx = (multi_buffer_context *) buffer->context;
    for (ggml_backend_buffer_t b : ctx->buffers) {
        ggml_backend_buffer_clear(b, value);
    }
}

const ggml_backend_buffer_i multi_buffer_iface = {
    /* .free_buffer   = */ multi_buffer_free,
    /* .get_base      = */ multi_buffer_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ nullptr,
    /* .set_tensor    = */ nullptr,
    /* .get_tensor    = */ nullptr,
    /* .cpy_tensor    = */ nullptr,
    /* .clear         = */ multi_buffer_clear,
    /* .reset         = */ nullptr,
};

ggml_backend_buffer_t multi_buffer_new(std::vector<ggml_backend_buffer_t> buffers) {
    GGML_ASSERT(!buffers.empty());
    size_t total = 0;
    for (ggml_backend_buffer_t b : buffers) {
        total += ggml_backend_buffer_get_size(b);
    }
    ggml_backend_buffer_type_t buft = buffers[0]->buft;
    auto * ctx = new multi_buffer_context{std::move(buffers)};
    return ggml_backend_buffer_init(buft, multi_buffer_iface, ctx, total);
}

} // namespace

static bool ggml_backend_buffer_is_multi_buffer(ggml_backend_buffer_t buffer) {
    return buffer->iface.free_buffer == multi_buffer_free;
}

static void ggml_backend_multi_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage) {
    auto * ctx = (multi_buffer_context *) buffer->context;
    for (ggml_backend_buffer_t b : ctx->buffers) {
        ggml_backend_buffer_set_usage(b, usage);
    }
}

// =============================================================================================
// Tensor data access

static ggml_backend_buffer_t tensor_storage_buffer(const struct ggml_tensor * tensor) {
    return tensor->view_src ? tensor->view_src->buffer : tensor->buffer;
}

void ggml_backend_tensor_set(struct ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    GGML_ASSERT(tensor != nullptr);
    ggml_backend_buffer_t buf = tensor_storage_buffer(tensor);
    if (size == 0) {
        return;
    }
    GGML_ASSERT(buf != nullptr && "tensor buffer not set");
    GGML_ASSERT(tensor->data != nullptr && "tensor not allocated");
    GGML_ASSERT(offset + size >= offset && offset + size <= ggml_nbytes(tensor) && "tensor write out of bounds");
    buf->iface.set_tensor(buf, tensor, data, offset, size);
}

void ggml_backend_tensor_get(const struct ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    GGML_ASSERT(tensor != nullptr);
    ggml_backend_buffer_t buf = tensor_storage_buffer(tensor);
    if (size == 0) {
        return;
    }
    GGML_ASSERT(buf != nullptr && "tensor buffer not set");
    GGML_ASSERT(tensor->data != nullptr && "tensor not allocated");
    GGML_ASSERT(offset + size >= offset && offset + size <= ggml_nbytes(tensor) && "tensor read out of bounds");
    buf->iface.get_tensor(buf, tensor, data, offset, size);
}

void ggml_backend_tensor_memset(struct ggml_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    GGML_ASSERT(tensor != nullptr);
    ggml_backend_buffer_t buf = tensor_storage_buffer(tensor);
    if (size == 0) {
        return;
    }
    GGML_ASSERT(buf != nullptr && "tensor buffer not set");
    GGML_ASSERT(tensor->data != nullptr && "tensor not allocated");
    GGML_ASSERT(offset + size >= offset && offset + size <= ggml_nbytes(tensor) && "tensor write out of bounds");
    GGML_ASSERT(buf->iface.memset_tensor != nullptr && "memset not implemented by this buffer");
    buf->iface.memset_tensor(buf, tensor, value, offset, size);
}

void ggml_backend_tensor_set_async(ggml_backend_t backend, struct ggml_tensor * tensor, const void * data,
                                   size_t offset, size_t size) {
    GGML_ASSERT(backend != nullptr && tensor != nullptr);
    if (backend->iface.set_tensor_async == nullptr) {
        ggml_backend_tensor_set(tensor, data, offset, size);
        return;
    }
    if (size == 0) {
        return;
    }
    GGML_ASSERT(tensor->data != nullptr && "tensor not allocated");
    GGML_ASSERT(offset + size >= offset && offset + size <= ggml_nbytes(tensor) && "tensor write out of bounds");
    backend->iface.set_tensor_async(backend, tensor, data, offset, size);
}

void ggml_backend_tensor_get_async(ggml_backend_t backend, const struct ggml_tensor * tensor, void * data,
                                   size_t offset, size_t size) {
    GGML_ASSERT(backend != nullptr && tensor != nullptr);
    if (backend->iface.get_tensor_async == nullptr) {
        ggml_backend_tensor_get(tensor, data, offset, size);
        return;
    }
    if (size == 0) {
        return;
    }
    GGML_ASSERT(tensor->data != nullptr && "tensor not allocated");
    GGML_ASSERT(offset + size >= offset && offset + size <= ggml_nbytes(tensor) && "tensor read out of bounds");
    backend->iface.get_tensor_async(backend, tensor, data, offset, size);
}


void ggml_backend_tensor_copy(const struct ggml_tensor * src, struct ggml_tensor * dst) {
    GGML_ASSERT(src != nullptr && dst != nullptr);
    GGML_ASSERT(ggml_are_same_layout(src, dst) && "cannot copy tensors with different layouts");
    if (src == dst) {
        return;
    }
    ggml_backend_buffer_t src_buf = tensor_storage_buffer(src);
    ggml_backend_buffer_t dst_buf = tensor_storage_buffer(dst);
    GGML_ASSERT(src_buf != nullptr && dst_buf != nullptr && "tensor buffer not set");

    const size_t nbytes = ggml_nbytes(src);
    if (ggml_backend_buffer_is_host(src_buf)) {
        ggml_backend_tensor_set(dst, src->data, 0, nbytes);
    } else if (ggml_backend_buffer_is_host(dst_buf)) {
        ggml_backend_tensor_get(src, dst->data, 0, nbytes);
    } else if (dst_buf->iface.cpy_tensor == nullptr || !dst_buf->iface.cpy_tensor(dst_buf, src, dst)) {
        // two device buffers that cannot talk directly: stage through host memory
        void * staging = malloc(nbytes);
        GGML_ASSERT(staging != nullptr && "out of host memory for a staging copy");
        ggml_backend_tensor_get(src, staging, 0, nbytes);
        ggml_backend_tensor_set(dst, staging, 0, nbytes);
        free(staging);
    }
}

void ggml_backend_tensor_copy_async(ggml_backend_t backend_src, ggml_backend_t backend_dst,
                                    const struct ggml_tensor * src, struct ggml_tensor * dst) {
    GGML_ASSERT(ggml_are_same_layout(src, dst) && "cannot copy tensors with different layouts");
    if (src == dst) {
        return;
    }
    if (backend_dst->iface.cpy_tensor_async != nullptr &&
        backend_dst->iface.cpy_tensor_async(backend_src, backend_dst, src, dst)) {
        return;
    }
    // the copy must observe everything queued before it on both streams
    ggml_backend_synchronize(backend_src);
    ggml_backend_synchronize(backend_dst);
    ggml_backend_tensor_copy(src, dst);
}

// =============================================================================================
// Backend

bool ggml_guid_matches(ggml_guid_t guid_a, ggml_guid_t guid_b) {
    return memcmp(guid_a, guid_b, sizeof(ggml_guid)) == 0;
}

ggml_guid_t ggml_backend_guid(ggml_backend_t backend) {
    if (backend == nullptr) {
        return nullptr;
    }
    return backend->guid;
}

const char * ggml_backend_name(ggml_backend_t backend) {
    if (backend == nullptr) {
        return "NULL";
    }
    return backend->iface.get_name(backend);
}

void ggml_backend_free(ggml_backend_t backend) {
    if (backend == nullptr) {
        return;
    }
    backend->iface.free(backend);
}

ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend) {
    GGML_ASSERT(backend != nullptr);
    return backend->device;
}

ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend) {
    return ggml_backend_dev_buffer_type(ggml_backend_get_device(backend));
}

ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size) {
    return ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(backend), size);
}

size_t ggml_backend_get_alignment(ggml_backend_t backend) {
    return ggml_backend_buft_get_alignment(ggml_backend_get_default_buffer_type(backend));
}

size_t ggml_backend_get_max_size(ggml_backend_t backend) {
    return ggml_backend_buft_get_max_size(ggml_backend_get_default_buffer_type(backend));
}

void ggml_backend_synchronize(ggml_backend_t backend) {
    GGML_ASSERT(backend != nullptr);
    if (backend->iface.synchronize == nullptr) {
        return;
    }
    backend->iface.synchronize(backend);
}

enum ggml_status ggml_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * cgraph) {
    enum ggml_status status = ggml_backend_graph_compute_async(backend, cgraph);
    ggml_backend_synchronize(backend);
    return status;
}

enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, struct ggml_cgraph * cgraph) {
    GGML_ASSERT(backend != nullptr && cgraph != nullptr);
    // single-node extension kernels run here too (temporary plan, never fusion); a device
    // without registrations goes straight to iface.graph_compute
    return ggml_ext_compute_direct(backend, cgraph, 0, cgraph->n_nodes);
}

bool ggml_backend_supports_op(ggml_backend_t backend, const struct ggml_tensor * op) {
    return ggml_backend_dev_supports_op(ggml_backend_get_device(backend), op);
}

bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft) {
    return ggml_backend_dev_supports_buft(ggml_backend_get_device(backend), buft);
}

bool ggml_backend_offload_op(ggml_backend_t backend, const struct ggml_tensor * op) {
    return ggml_backend_dev_offload_op(ggml_backend_get_device(backend), op);
}

// =============================================================================================
// Events

ggml_backend_event_t ggml_backend_event_new(ggml_backend_dev_t device) {
    // a device without event support (like the CPU) reports it by returning NULL
    if (device == nullptr || device->iface.event_new == nullptr) {
        return nullptr;
    }
    return device->iface.event_new(device);
}

void ggml_backend_event_free(ggml_backend_event_t event) {
    if (event == nullptr) {
        return;
    }
    GGML_ASSERT(event->device != nullptr && event->device->iface.event_free != nullptr);
    event->device->iface.event_free(event->device, event);
}

void ggml_backend_event_record(ggml_backend_event_t event, ggml_backend_t backend) {
    GGML_ASSERT(event != nullptr && backend != nullptr);
    GGML_ASSERT(backend->iface.event_record != nullptr && "backend does not support events");
    backend->iface.event_record(backend, event);
}

void ggml_backend_event_synchronize(ggml_backend_event_t event) {
    GGML_ASSERT(event != nullptr && event->device != nullptr);
    GGML_ASSERT(event->device->iface.event_synchronize != nullptr && "device does not support events");
    event->device->iface.event_synchronize(event->device, event);
}

void ggml_backend_event_wait(ggml_backend_t backend, ggml_backend_event_t event) {
    GGML_ASSERT(event != nullptr && backend != nullptr);
    GGML_ASSERT(backend->iface.event_wait != nullptr && "backend does not support events");
    backend->iface.event_wait(backend, event);
}

// =============================================================================================
// Devices

const char * ggml_backend_dev_name(ggml_backend_dev_t device) {
    return device->iface.get_name(device);
}

const char * ggml_backend_dev_description(ggml_backend_dev_t device) {
    return device->iface.get_description(device);
}

void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total) {
    device->iface.get_memory(device, free, total);
}

enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device) {
    return device->iface.get_type(device);
}

void ggml_backend_dev_get_props(ggml_backend_dev_t device, struct ggml_backend_dev_props * props) {
    memset(props, 0, sizeof(*props));
    device->iface.get_props(device, props);
}

ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device) {
    return device->reg;
}

ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t device, const char * params) {
    return device->iface.init_backend(device, params);
}

ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device) {
    return device->iface.get_buffer_type(device);
}

ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t device) {
    if (device->iface.get_host_buffer_type == nullptr) {
        return nullptr;
    }
    return device->iface.get_host_buffer_type(device);
}

ggml_backend_buffer_t ggml_backend_dev_buffer_from_host_ptr(ggml_backend_dev_t device, void * ptr, size_t size,
                                                            size_t max_tensor_size) {
    if (device->iface.buffer_from_host_ptr == nullptr) {
        return nullptr;
    }
    return device->iface.buffer_from_host_ptr(device, ptr, size, max_tensor_size);
}

bool ggml_backend_dev_supports_op(ggml_backend_dev_t device, const struct ggml_tensor * op) {
    // native first: extension callbacks only run when the device itself cannot
    return device->iface.supports_op(device, op) || ggml_ext_dev_supports_op(device, op);
}

bool ggml_backend_dev_supports_buft(ggml_backend_dev_t device, ggml_backend_buffer_type_t buft) {
    return device->iface.supports_buft(device, buft);
}

bool ggml_backend_dev_offload_op(ggml_backend_dev_t device, const struct ggml_tensor * op) {
    if (device->iface.offload_op == nullptr) {
        return false;
    }
    return device->iface.offload_op(device, op);
}

// =============================================================================================
// Utils: place every tensor of a no_alloc context into buffers of one type

namespace {

// Allocates one buffer for the tensors [first, last) of ctx and places them (views after their
// sources, which always precede them in creation order). On failure every buffer made so far is
// released so the caller can simply return NULL.
bool alloc_tensor_range(struct ggml_context * ctx, struct ggml_tensor * first, struct ggml_tensor * last,
                        ggml_backend_buffer_type_t buft, size_t size, std::vector<ggml_backend_buffer_t> & buffers) {
    ggml_backend_buffer_t buffer = ggml_backend_buft_alloc_buffer(buft, size);
    if (buffer == nullptr) {
        GGML_LOG_ERROR("%s: failed to allocate %s buffer of size %zu\n", __func__, ggml_backend_buft_name(buft), size);
        for (ggml_backend_buffer_t b : buffers) {
            ggml_backend_buffer_free(b);
        }
        buffers.clear();
        return false;
    }

    struct ggml_tallocr talloc = ggml_tallocr_new(buffer);
    for (struct ggml_tensor * t = first; t != last; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data != nullptr || t->buffer != nullptr) {
            continue;
        }
        enum ggml_status st = GGML_STATUS_SUCCESS;
        if (t->view_src == nullptr) {
            st = ggml_tallocr_alloc(&talloc, t);
        } else if (t->view_src->buffer != nullptr && t->view_src->data != nullptr) {
            st = ggml_backend_view_init(t);
        }
        if (st != GGML_STATUS_SUCCESS) {
            GGML_LOG_ERROR("%s: failed to initialise tensor %s\n", __func__, t->name);
            ggml_backend_buffer_free(buffer);
            for (ggml_backend_buffer_t b : buffers) {
                ggml_backend_buffer_free(b);
            }
            buffers.clear();
            return false;
        }
    }
    buffers.push_back(buffer);
    return true;
}

size_t ctx_tensor_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor * t, size_t alignment) {
    if (t->data != nullptr || t->buffer != nullptr || t->view_src != nullptr) {
        return 0;
    }
    return GGML_PAD(ggml_backend_buft_get_alloc_size(buft, t), alignment);
}

} // namespace

size_t ggml_backend_alloc_ctx_tensors_from_buft_size(struct ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    GGML_ASSERT(ggml_get_no_alloc(ctx) == true);
    const size_t alignment = ggml_backend_buft_get_alignment(buft);
    size_t total = 0;
    for (struct ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        total += ctx_tensor_alloc_size(buft, t, alignment);
    }
    return total;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context * ctx,
                                                               ggml_backend_buffer_type_t buft) {
    GGML_ASSERT(ggml_get_no_alloc(ctx) == true);
    const size_t alignment = ggml_backend_buft_get_alignment(buft);
    const size_t max_size  = ggml_backend_buft_get_max_size(buft);

    std::vector<ggml_backend_buffer_t> buffers;
    struct ggml_tensor * first = ggml_get_first_tensor(ctx);
    size_t cur_size = 0;
    for (struct ggml_tensor * t = first; t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        const size_t this_size = ctx_tensor_alloc_size(buft, t, alignment);
        if (this_size > max_size) {
            // still allocated on its own: the backend decides whether it can hold it
            GGML_LOG_WARN("%s: tensor %s is too large to fit in a %s buffer (tensor size: %zu, max buffer size: %zu)\n",
                          __func__, t->name, ggml_backend_buft_name(buft), this_size, max_size);
        }
        if (cur_size > 0 && cur_size + this_size > max_size) {
            if (!alloc_tensor_range(ctx, first, t, buft, cur_size, buffers)) {
                return nullptr;
            }
            first    = t;
            cur_size = this_size;
        } else {
            cur_size += this_size;
        }
    }
    if (cur_size > 0) {
        if (!alloc_tensor_range(ctx, first, nullptr, buft, cur_size, buffers)) {
            return nullptr;
        }
    } else if (!buffers.empty() && first != nullptr) {
        // trailing views of tensors placed in earlier buffers still need their data pointers
        for (struct ggml_tensor * t = first; t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
            if (t->data == nullptr && t->buffer == nullptr && t->view_src != nullptr && t->view_src->buffer != nullptr &&
                t->view_src->data != nullptr) {
                ggml_backend_view_init(t);
            }
        }
    }

    if (buffers.empty()) {
        GGML_LOG_DEBUG("%s: all tensors in the context are already allocated\n", __func__);
        return nullptr;
    }
    if (buffers.size() == 1) {
        return buffers[0];
    }
    return multi_buffer_new(std::move(buffers));
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend) {
    return ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_get_default_buffer_type(backend));
}
