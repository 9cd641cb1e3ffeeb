// FUSE over io_uring (kernel 6.14+): the kernel's protocol structs and constants, which neither
// libfuse 3.14 nor Debian's <linux/fuse.h> define (written from the kernel's
// include/uapi/linux/fuse.h), and thin wrappers over liburing for one ring per queue. No policy:
// RingTransport (Swift) decides what is registered, when, and where replies go.
#include <liburing.h>
#include <string.h>
#include <stdint.h>
#include <sys/uio.h>
#include <unistd.h>
#include <sys/syscall.h>

// FUSE_OVER_IO_URING is bit 41 of the INIT flags: bit 9 of flags2, which the kernel reads only
// when FUSE_INIT_EXT (bit 30 of flags) is set.
#define DOCFS_FUSE_INIT_EXT_BIT (1u << 30)
#define DOCFS_FUSE_OVER_IO_URING_FLAGS2 (1u << 9)

enum {
    DOCFS_FUSE_IO_URING_CMD_REGISTER = 1,
    DOCFS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

// struct fuse_uring_ent_in_out
struct docfs_fuse_uring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;   // the request's unique id; sent back in the commit
    uint32_t payload_sz;  // bytes of the payload buffer in use (request, then reply)
    uint32_t padding;
    uint64_t reserved;
};

// struct fuse_uring_req_header: the header buffer of one ring entry.
struct docfs_fuse_uring_req_header {
    char in_out[128];  // fuse_in_header of the request, then fuse_out_header of the reply
    char op_in[128];   // the request's first argument (the op's own header), may be empty
    struct docfs_fuse_uring_ent_in_out ring_ent_in_out;
};

// struct fuse_uring_cmd_req: the command in the second half of a 128-byte SQE.
struct docfs_fuse_uring_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

/// A ring with 128-byte SQEs (the fuse command lives in the SQE's second half).
static inline int docfs_uring_init(struct io_uring *ring, unsigned entries) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SQE128;
    return io_uring_queue_init_params(entries, ring, &p);
}

static inline void docfs_uring_exit(struct io_uring *ring) { io_uring_queue_exit(ring); }

/// Queues a FUSE_IO_URING_CMD_* for `qid` on `fuse_fd`; `iov` (header, payload) must stay valid.
/// -EBUSY when the submission queue is full.
static inline int docfs_uring_prep_fuse_cmd(struct io_uring *ring, int fuse_fd, uint32_t cmd_op,
                                            uint16_t qid, uint64_t commit_id,
                                            struct iovec *iov, uint64_t user_data) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) return -EBUSY;
    memset(sqe, 0, 128);
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = fuse_fd;
    sqe->cmd_op = cmd_op;
    sqe->addr = (uint64_t)(uintptr_t)iov;
    sqe->len = 2;
    sqe->user_data = user_data;
    struct docfs_fuse_uring_cmd_req *req = (struct docfs_fuse_uring_cmd_req *)sqe->cmd;
    req->qid = qid;
    req->commit_id = commit_id;
    return 0;
}

/// Queues a read of `len` bytes from `fd` (the queue's wake-up eventfd).
static inline int docfs_uring_prep_read(struct io_uring *ring, int fd, void *buf, unsigned len,
                                        uint64_t user_data) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) return -EBUSY;
    memset(sqe, 0, 128);
    io_uring_prep_read(sqe, fd, buf, len, 0);
    sqe->user_data = user_data;
    return 0;
}

/// Submits what is queued and waits for at least `wait_nr` completions.
static inline int docfs_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr) {
    return io_uring_submit_and_wait(ring, wait_nr);
}

/// Takes up to `max` completions: their user_data and result.
static inline unsigned docfs_uring_reap(struct io_uring *ring, uint64_t *data, int32_t *res,
                                        unsigned max) {
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
        if (n == max) break;
        data[n] = cqe->user_data;
        res[n] = cqe->res;
        n++;
    }
    io_uring_cq_advance(ring, n);
    return n;
}

/// Pins the calling thread to one CPU (sched_setaffinity through the raw system call, which
/// Swift's Glibc module does not declare). 0, or -1 with errno (a CPU that is offline).
static inline int docfs_pin_thread_to_cpu(unsigned cpu) {
    unsigned long mask[16] = {0};
    if (cpu >= sizeof(mask) * 8) return -1;
    mask[cpu / (8 * sizeof(unsigned long))] |= 1ul << (cpu % (8 * sizeof(unsigned long)));
    return (int)syscall(SYS_sched_setaffinity, 0, sizeof(mask), mask);
}
