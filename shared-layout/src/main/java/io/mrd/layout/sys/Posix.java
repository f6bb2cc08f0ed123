package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The C library's memory and file calls mrd needs and the JDK does not offer, bound through the
 * Foreign Function &amp; Memory API: fixed-address {@code mmap} (both sides of a
 * mapping must agree on flags, so primary and secondaries share this class),
 * {@code mlock}, {@code madvise}, {@code mincore}, {@code flock}, {@code memfd_create}, {@code fallocate},
 * file seals ({@code fcntl}). Sockets are {@link UnixSocket}'s.
 * <p>
 * Every failure is an {@link MrdException} whose message names the call, its
 * arguments and the errno as name and text ({@code ENOMEM: Cannot allocate memory}).
 */
public final class Posix
{
    public static final int PROT_NONE = 0;
    public static final int PROT_READ = 1;
    public static final int PROT_WRITE = 2;

    public static final int MAP_SHARED = 0x01;
    public static final int MAP_PRIVATE = 0x02;
    public static final int MAP_FIXED = 0x10;
    public static final int MAP_ANONYMOUS = 0x20;
    public static final int MAP_NORESERVE = 0x4000;
    public static final int MAP_POPULATE = 0x8000;
    /** Linux 4.17+: like MAP_FIXED but fails with EEXIST instead of replacing an existing mapping. */
    public static final int MAP_FIXED_NOREPLACE = 0x100000;

    public static final int O_RDONLY = 0;
    public static final int O_RDWR = 2;
    public static final int O_CREAT = 0100;
    public static final int O_EXCL = 0200;
    public static final int O_TRUNC = 01000;
    public static final int O_CLOEXEC = 02000000;

    public static final int LOCK_SH = 1;
    public static final int LOCK_EX = 2;
    public static final int LOCK_NB = 4;
    public static final int LOCK_UN = 8;

    public static final int FALLOC_FL_KEEP_SIZE = 1;
    public static final int FALLOC_FL_PUNCH_HOLE = 2;

    public static final int MFD_CLOEXEC = 1;
    public static final int MFD_HUGETLB = 4;

    /**
     * madvise advice (Linux 5.14+): fault in every page of the range writable, as a write to each would, without
     * writing; an older kernel answers EINVAL.
     */
    public static final int MADV_POPULATE_WRITE = 23;

    private static final MethodHandle MMAP = bind("mmap",
        FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final Libc.Function MUNMAP = function("munmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    private static final Libc.Function MLOCK = function("mlock", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    private static final Libc.Function MUNLOCK =
        function("munlock", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    private static final Libc.Function MADVISE = function("madvise",
        FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final Libc.Function MINCORE = function("mincore",
        FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS));
    private static final Libc.Function OPEN = function("open",
        FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2));
    private static final Libc.Function CLOSE = function("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final Libc.Function FTRUNCATE =
        function("ftruncate", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final Libc.Function FALLOCATE = function("fallocate",
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG));
    private static final Libc.Function FLOCK = function("flock", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final Libc.Function MEMFD_CREATE = function("memfd_create",
        FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final Libc.Function GETUID = Libc.functionNoErrno("getuid", FunctionDescriptor.of(JAVA_INT));
    private static final Libc.Function GETGID = Libc.functionNoErrno("getgid", FunctionDescriptor.of(JAVA_INT));
    private static final Libc.Function GETRLIMIT =
        function("getrlimit", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    private static final Libc.Function FCNTL = function("fcntl",
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2));
    private static final int F_GETFD = 1;
    private static final int F_DUPFD_CLOEXEC = 1030;

    /** RLIMIT_MEMLOCK's resource number on Linux. */
    public static final int RLIMIT_MEMLOCK = 8;
    /** What getrlimit reports for "no limit". */
    public static final long RLIM_INFINITY = -1L;

    private Posix()
    {
    }

    /**
     * Reserves {@code length} bytes of address space at exactly {@code address}, inaccessible and
     * backed by nothing, failing instead of replacing anything already mapped there.
     *
     * @return the reservation.
     * @throws MrdException EEXIST naming the range when any part of it is already mapped.
     */
    public static MemorySegment reserve(final long address, final long length)
    {
        return mapFixedNoReplace(address, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }

    /**
     * {@code mmap(address, length, prot, flags | MAP_FIXED_NOREPLACE, fd, offset)}, checking that the kernel
     * honoured the address (kernels before 4.17 treat the flag as a hint and map elsewhere).
     */
    private static MemorySegment mapFixedNoReplace(
        final long address, final long length, final int prot, final int flags, final int fd, final long offset)
    {
        final long got = mmapRaw(address, length, prot, flags | MAP_FIXED_NOREPLACE, fd, offset);
        if (got == -1L)
        {
            final int errno = errno();
            if (errno == ErrorCode.EEXIST.errno())
            {
                throw new MrdException(ErrorCode.EEXIST, "address range " + range(address, length) +
                    " is already mapped in this process (pid " + ProcessHandle.current().pid() +
                    "): start the daemon at another --base-virtaddr");
            }
            throw failure(errno, "mmap(" + range(address, length) + ", fd " + fd + ")");
        }
        if (got != address)
        {
            munmapQuietly(got, length);
            throw new MrdException(ErrorCode.ENOSYS, "the kernel mapped " + Sizes.hex(got) + " instead of " +
                Sizes.hex(address) + ": MAP_FIXED_NOREPLACE needs Linux 4.17 or newer");
        }
        return MemorySegment.ofAddress(address).reinterpret(length);
    }

    /**
     * {@code mmap} with {@code MAP_FIXED} over a range this process has already reserved: replaces
     * that part of the reservation and nothing else.
     */
    public static MemorySegment mapFixed(
        final long address, final long length, final int prot, final int flags, final int fd, final long offset)
    {
        final long got = mmapRaw(address, length, prot, flags | MAP_FIXED, fd, offset);
        if (got == -1L)
        {
            throw failure(errno(), "mmap(MAP_FIXED " + range(address, length) + ", fd " + fd + ", offset " +
                Sizes.hex(offset) + ")");
        }
        return MemorySegment.ofAddress(address).reinterpret(length);
    }

    /**
     * Puts a part of a reservation back to inaccessible, unbacked address space (the reverse of
     * {@link #mapFixed}), so the range stays reserved for this process.
     */
    public static void unmapToReservation(final long address, final long length)
    {
        mapFixed(address, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }

    /**
     * {@code mmap(NULL, …)} wherever the kernel likes.
     */
    public static MemorySegment map(final long length, final int prot, final int flags, final int fd, final long offset)
    {
        final long got = mmapRaw(0, length, prot, flags, fd, offset);
        if (got == -1L)
        {
            throw failure(errno(), "mmap(" + Sizes.format(length) + ", fd " + fd + ")");
        }
        return MemorySegment.ofAddress(got).reinterpret(length);
    }

    public static void munmap(final long address, final long length)
    {
        if (callInt(MUNMAP, MemorySegment.ofAddress(address), length) != 0)
        {
            throw failure(errno(), "munmap(" + range(address, length) + ")");
        }
    }

    public static void munmapQuietly(final long address, final long length)
    {
        callInt(MUNMAP, MemorySegment.ofAddress(address), length);
    }

    /**
     * Pins the pages of a range in memory, as {@code ibv_reg_mr} does.
     *
     * @return 0 on success, else the errno (ENOMEM when RLIMIT_MEMLOCK would be exceeded, EAGAIN
     * when the kernel could not lock some pages).
     */
    public static int mlock(final long address, final long length)
    {
        return callInt(MLOCK, MemorySegment.ofAddress(address), length) == 0 ? 0 : errno();
    }

    public static int munlock(final long address, final long length)
    {
        return callInt(MUNLOCK, MemorySegment.ofAddress(address), length) == 0 ? 0 : errno();
    }

    /**
     * {@code madvise(address, length, advice)}; {@code address} must be page-aligned.
     *
     * @return 0 on success, else the errno (EINVAL for advice the kernel does not know, or a range it does not
     * apply to; ENOMEM when part of the range is not mapped; EFAULT when populating would have raised SIGBUS).
     */
    public static int madvise(final long address, final long length, final int advice)
    {
        return callInt(MADVISE, MemorySegment.ofAddress(address), length, advice) == 0 ? 0 : errno();
    }

    /**
     * {@code mincore(address, length, vector)}: one byte per page of the range into {@code vector}, whose low bit
     * is set when the page is resident (for a shared file mapping: in the page cache); {@code address} must be
     * page-aligned and {@code vector} at least one byte per page long.
     *
     * @return 0 on success, else the errno (ENOMEM when part of the range is not mapped).
     */
    public static int mincore(final long address, final long length, final MemorySegment vector)
    {
        return callInt(MINCORE, MemorySegment.ofAddress(address), length, vector) == 0 ? 0 : errno();
    }

    /**
     * @return the file descriptor.
     */
    public static int open(final String path, final int flags, final int mode)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final int fd = callInt(OPEN, arena.allocateFrom(path), flags, mode);
            if (fd < 0)
            {
                throw failure(errno(), "open(" + path + ")");
            }
            return fd;
        }
    }

    public static void close(final int fd)
    {
        callInt(CLOSE, fd);
    }

    /**
     * @return true when {@code fd} is an open descriptor of this process ({@code fcntl(F_GETFD)}), so that it
     * can be checked before a protocol exchange commits to sending it.
     */
    public static boolean isOpen(final int fd)
    {
        return fd >= 0 && callInt(FCNTL, fd, F_GETFD, 0) != -1;
    }

    /**
     * {@code fcntl(F_DUPFD_CLOEXEC)}: a new descriptor of the same open file, close-on-exec set.
     *
     * @throws MrdException with the errno (EBADF when {@code fd} is not open, EMFILE at the descriptor limit).
     */
    public static int dupCloexec(final int fd)
    {
        final int copy = callInt(FCNTL, fd, F_DUPFD_CLOEXEC, 0);
        if (copy < 0)
        {
            throw failure(errno(), "fcntl(fd " + fd + ", F_DUPFD_CLOEXEC)");
        }
        return copy;
    }

    public static void ftruncate(final int fd, final long length)
    {
        if (callInt(FTRUNCATE, fd, length) != 0)
        {
            throw failure(errno(), "ftruncate(fd " + fd + ", " + Sizes.format(length) + ")");
        }
    }

    /**
     * Gives the pages of a file range back to the system (hugetlbfs and tmpfs both support it), so a
     * freed segment does not keep memory.
     *
     * @return 0 or the errno.
     */
    public static int punchHole(final int fd, final long offset, final long length)
    {
        return callInt(FALLOCATE, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) == 0 ? 0 : errno();
    }

    /**
     * {@code flock(fd, operation)}.
     *
     * @return 0, or the errno ({@code EWOULDBLOCK}, {@link ErrorCode#EAGAIN}, when LOCK_NB was given and another holds the lock).
     */
    public static int flock(final int fd, final int operation)
    {
        while (true)
        {
            if (callInt(FLOCK, fd, operation) == 0)
            {
                return 0;
            }
            final int errno = errno();
            if (errno != ErrorCode.EINTR.errno())
            {
                return errno;
            }
        }
    }

    public static int memfdCreate(final String name, final int flags)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final int fd = callInt(MEMFD_CREATE, arena.allocateFrom(name), flags);
            if (fd < 0)
            {
                throw failure(errno(), "memfd_create(" + name + ")");
            }
            return fd;
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // File seals (fcntl F_ADD_SEALS / F_GET_SEALS, Linux 3.17+; hugetlbfs files 4.16+): what keeps a file passed
    // to another process from changing size under that process's mappings.

    /** memfd_create flag: the memfd accepts seals; without it the kernel sets F_SEAL_SEAL at creation. */
    public static final int MFD_ALLOW_SEALING = 2;

    public static final int F_ADD_SEALS = 1033;
    public static final int F_GET_SEALS = 1034;
    /** No more seals may be added. */
    public static final int F_SEAL_SEAL = 0x0001;
    /** The file may not shrink. */
    public static final int F_SEAL_SHRINK = 0x0002;
    /** The file may not grow. */
    public static final int F_SEAL_GROW = 0x0004;
    /** No writes at all, not even through existing shared mappings (no writable shared mapping may exist). */
    public static final int F_SEAL_WRITE = 0x0008;
    /** No new writable mappings or writes; existing mappings keep writing (Linux 5.1+). */
    public static final int F_SEAL_FUTURE_WRITE = 0x0010;

    /**
     * {@code fcntl(fd, F_GET_SEALS)}.
     *
     * @return the file's seals ({@code F_SEAL_*} bits).
     * @throws MrdException with fcntl's errno: EINVAL when the file cannot be sealed at all (neither a memfd nor
     *                      a tmpfs or hugetlbfs file, or a hugetlbfs file before Linux 4.16).
     */
    public static int getSeals(final int fd)
    {
        final int seals = callInt(FCNTL, fd, F_GET_SEALS, 0);
        if (seals < 0)
        {
            throw failure(errno(), "fcntl(fd " + fd + ", F_GET_SEALS)");
        }
        return seals;
    }

    /**
     * {@code fcntl(fd, F_ADD_SEALS, seals)}: adds seals, for every descriptor of the file, never to be removed.
     *
     * @return 0, or the errno: EPERM when the file has F_SEAL_SEAL or {@code fd} is not open for writing, EBUSY
     * for F_SEAL_WRITE while a writable shared mapping exists, EINVAL when the file cannot be sealed.
     */
    public static int addSeals(final int fd, final int seals)
    {
        return callInt(FCNTL, fd, F_ADD_SEALS, seals) == 0 ? 0 : errno();
    }

    /**
     * {@code fallocate(fd, 0, offset, length)}: allocates the file's pages in the range now, so that a shortage
     * (no free hugepages, a cgroup's memory limit) is this call's error rather than a fault later.
     *
     * @return 0 or the errno (ENOSPC or ENOMEM when the memory cannot be had, EPERM beyond the size of a file
     * sealed with F_SEAL_GROW).
     */
    public static int allocateFile(final int fd, final long offset, final long length)
    {
        return callInt(FALLOCATE, fd, 0, offset, length) == 0 ? 0 : errno();
    }

    // ---------------------------------------------------------------------------------------------------------

    public static int getuid()
    {
        return callInt(GETUID);
    }

    public static int getgid()
    {
        return callInt(GETGID);
    }

    /**
     * @return the soft RLIMIT_MEMLOCK in bytes, or {@link #RLIM_INFINITY}.
     */
    public static long memlockLimit()
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment rlimit = arena.allocate(16, 8);
            if (callInt(GETRLIMIT, RLIMIT_MEMLOCK, rlimit) != 0)
            {
                throw failure(errno(), "getrlimit(RLIMIT_MEMLOCK)");
            }
            return rlimit.get(ValueLayout.JAVA_LONG, 0);
        }
    }

    /**
     * @return an exception naming the call and the errno as name and text.
     */
    public static MrdException failure(final int errno, final String call)
    {
        return new MrdException(ErrorCode.of(errno), call + " failed: " + ErrorCode.describe(errno));
    }

    private static int errno()
    {
        return Libc.errno();
    }

    private static String range(final long address, final long length)
    {
        return "[" + Sizes.hex(address) + ", " + Sizes.hex(address + length) + ")";
    }

    private static long mmapRaw(
        final long address, final long length, final int prot, final int flags, final int fd, final long offset)
    {
        try
        {
            final MemorySegment result = (MemorySegment)MMAP.invokeExact(
                Libc.callState(), MemorySegment.ofAddress(address), length, prot, flags, fd, offset);
            return result.address();
        }
        catch (final Throwable t)
        {
            throw new IllegalStateException("mmap binding", t);
        }
    }

    private static int callInt(final Libc.Function function, final Object... args)
    {
        return (int)function.call(args);
    }

    private static MethodHandle bind(final String name, final FunctionDescriptor descriptor, final Linker.Option... more)
    {
        return Libc.bind(name, descriptor, more);
    }

    private static Libc.Function function(
        final String name, final FunctionDescriptor descriptor, final Linker.Option... more)
    {
        return Libc.function(name, descriptor, more);
    }
}
