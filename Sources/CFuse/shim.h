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

// copy_file_range is declared only under _GNU_SOURCE, which Swift's Glibc module is built without.
static inline long docfs_copy_file_range(int fd_in, long *off_in, int fd_out, long *off_out,
                                         size_t len, unsigned int flags) {
    return syscall(SYS_copy_file_range, fd_in, off_in, fd_out, off_out, len, flags);
}
