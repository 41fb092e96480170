/*
 * eio_shim.c: an LD_PRELOAD library that makes writes and syncs of files under a path prefix
 * fail with EIO while a control file exists: a failing disk for one process, without
 * device-mapper. Built and driven by tests/support/eio_shim.py (read its docstring).
 *
 * Environment (read at every call, so a test can arm and disarm it while the process runs):
 *   MINIPULSAR_FAULT_CONTROL  path of the control file. Absent file: every call goes through.
 *                             Present: the calls below fail with EIO for every fd whose path
 *                             starts with one of the prefixes: the file's lines, or, when the
 *                             file is empty, MINIPULSAR_FAULT_PREFIX.
 *   MINIPULSAR_FAULT_PREFIX   the default prefix (an absolute, resolved path).
 *
 * Intercepted: write, pwrite(64), writev, pwritev(64), pwritev2/pwritev64v2, fsync, fdatasync,
 * sync_file_range, fallocate(64), posix_fallocate(64). Reads, opens, renames, unlinks and
 * ftruncate go through: only data written or synced fails, as on a disk with bad sectors.
 * The fd's path comes from readlink(/proc/self/fd/N), looked up only while the control file
 * exists (so a reused fd number is never judged by a stale path); while it is absent each
 * call costs one access(2).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define PATH_CAP 4096

static int path_has_prefix(const char *path, const char *prefix, size_t prefix_len) {
    if (prefix_len == 0 || strncmp(path, prefix, prefix_len) != 0) return 0;
    return path[prefix_len] == '\0' || path[prefix_len] == '/' || prefix[prefix_len - 1] == '/';
}

/* 1 when a call on fd must fail with EIO now. errno is preserved. */
static int faulty(int fd) {
    int saved = errno, hit = 0;
    const char *control = getenv("MINIPULSAR_FAULT_CONTROL");
    if (control == NULL || access(control, F_OK) != 0) { errno = saved; return 0; }
    char link[64], path[PATH_CAP];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) { errno = saved; return 0; }
    path[n] = '\0';
    char prefixes[PATH_CAP * 4];
    size_t len = 0;
    FILE *file = fopen(control, "re");
    if (file != NULL) { len = fread(prefixes, 1, sizeof prefixes - 1, file); fclose(file); }
    prefixes[len] = '\0';
    char *line = prefixes, *end;
    int any = 0;
    while (line != NULL && *line != '\0') {
        end = strchr(line, '\n');
        if (end != NULL) *end = '\0';
        size_t l = strlen(line);
        if (l > 0) { any = 1; if (path_has_prefix(path, line, l)) { hit = 1; break; } }
        line = end != NULL ? end + 1 : NULL;
    }
    if (!any) {
        const char *prefix = getenv("MINIPULSAR_FAULT_PREFIX");
        if (prefix != NULL) hit = path_has_prefix(path, prefix, strlen(prefix));
    }
    errno = saved;
    return hit;
}

#define REAL(name) \
    static __typeof__(&name) real_##name; \
    if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)
#define FAIL_IF_FAULTY(fd) do { if (faulty(fd)) { errno = EIO; return -1; } } while (0)

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write);
    FAIL_IF_FAULTY(fd);
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite);
    FAIL_IF_FAULTY(fd);
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite64);
    FAIL_IF_FAULTY(fd);
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    REAL(writev);
    FAIL_IF_FAULTY(fd);
    return real_writev(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    REAL(pwritev);
    FAIL_IF_FAULTY(fd);
    return real_pwritev(fd, iov, iovcnt, offset);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    REAL(pwritev64);
    FAIL_IF_FAULTY(fd);
    return real_pwritev64(fd, iov, iovcnt, offset);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    REAL(pwritev2);
    FAIL_IF_FAULTY(fd);
    return real_pwritev2(fd, iov, iovcnt, offset, flags);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    REAL(pwritev64v2);
    FAIL_IF_FAULTY(fd);
    return real_pwritev64v2(fd, iov, iovcnt, offset, flags);
}

int fsync(int fd) {
    REAL(fsync);
    FAIL_IF_FAULTY(fd);
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    FAIL_IF_FAULTY(fd);
    return real_fdatasync(fd);
}

int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags) {
    REAL(sync_file_range);
    FAIL_IF_FAULTY(fd);
    return real_sync_file_range(fd, offset, nbytes, flags);
}

int fallocate(int fd, int mode, off_t offset, off_t len) {
    REAL(fallocate);
    FAIL_IF_FAULTY(fd);
    return real_fallocate(fd, mode, offset, len);
}

int fallocate64(int fd, int mode, off_t offset, off_t len) {
    REAL(fallocate64);
    FAIL_IF_FAULTY(fd);
    return real_fallocate64(fd, mode, offset, len);
}

/* posix_fallocate returns the error number instead of setting errno. */
int posix_fallocate(int fd, off_t offset, off_t len) {
    REAL(posix_fallocate);
    if (faulty(fd)) return EIO;
    return real_posix_fallocate(fd, offset, len);
}

int posix_fallocate64(int fd, off_t offset, off_t len) {
    REAL(posix_fallocate64);
    if (faulty(fd)) return EIO;
    return real_posix_fallocate64(fd, offset, len);
}
