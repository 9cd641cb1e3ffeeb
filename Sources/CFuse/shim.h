// FUSE_USE_VERSION must be set before the include; 312 exposes fuse_session_loop_mt
// as a function taking an opaque loop config (lower versions make it a macro Swift can't see).
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
// The kernel protocol structs: the bridge reads the INIT request and amends its reply.
#include <linux/fuse.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <errno.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/eventfd.h>
// FUSE over io_uring: the kernel's structs and liburing wrappers (RingTransport).
#include "fuse_uring.h"

// copy_file_range and splice are declared only under _GNU_SOURCE, which Swift's Glibc module is
// built without.
static inline long docfs_copy_file_range(int fd_in, long *off_in, int fd_out, long *off_out,
                                         size_t len, unsigned int flags) {
    return syscall(SYS_copy_file_range, fd_in, off_in, fd_out, off_out, len, flags);
}
// glibc's splice, not syscall(2): it is a cancellation point, as read(2) is, so libfuse can
// cancel a worker waiting in it for the next request when the session ends on a signal.
extern ssize_t splice(int fd_in, __off64_t *off_in, int fd_out, __off64_t *off_out, size_t len,
                      unsigned int flags);
static inline long docfs_splice(int fd_in, off_t *off_in, int fd_out, off_t *off_out,
                                size_t len, unsigned int flags) {
    return splice(fd_in, off_in, fd_out, off_out, len, flags);
}
