package io.mrd.layout;

/**
 * Status codes carried by every protocol reply and by {@link MrdException}.
 * The numbers are Linux errno values so that a code read off the wire, out of
 * a log or from a native call means the same thing everywhere. This is the one table of errno values: native
 * code compares a call's errno with {@code ErrorCode.X.errno()} ({@code EWOULDBLOCK} is {@link #EAGAIN} on Linux).
 */
public enum ErrorCode
{
    OK(0, "success"),
    EPERM(1, "Operation not permitted"),
    ENOENT(2, "No such file or directory"),
    ESRCH(3, "No such process"),
    EINTR(4, "Interrupted system call"),
    EIO(5, "Input/output error"),
    ENXIO(6, "No such device or address"),
    EBADF(9, "Bad file descriptor"),
    EAGAIN(11, "Resource temporarily unavailable"),
    ENOMEM(12, "Cannot allocate memory"),
    EACCES(13, "Permission denied"),
    EFAULT(14, "Bad address"),
    EBUSY(16, "Device or resource busy"),
    EEXIST(17, "File exists"),
    ENODEV(19, "No such device"),
    ENOTDIR(20, "Not a directory"),
    EISDIR(21, "Is a directory"),
    EINVAL(22, "Invalid argument"),
    EMFILE(24, "Too many open files"),
    ENOSPC(28, "No space left on device"),
    EROFS(30, "Read-only file system"),
    EPIPE(32, "Broken pipe"),
    ERANGE(34, "Numerical result out of range"),
    ENAMETOOLONG(36, "File name too long"),
    ENOSYS(38, "Function not implemented"),
    ELOOP(40, "Too many levels of symbolic links"),
    EPROTO(71, "Protocol error"),
    EMSGSIZE(90, "Message too long"),
    EOPNOTSUPP(95, "Operation not supported"),
    ECONNABORTED(103, "Software caused connection abort"),
    ECONNRESET(104, "Connection reset by peer"),
    ETIMEDOUT(110, "Connection timed out"),
    ECONNREFUSED(111, "Connection refused"),
    ESTALE(116, "Stale file handle"),
    ECANCELED(125, "Operation canceled"),
    /** Not an errno: a code outside this table. */
    EUNKNOWN(-1, "Unknown error");

    private static final ErrorCode[] BY_ERRNO = new ErrorCode[256];

    static
    {
        for (final ErrorCode code : values())
        {
            if (code.errno >= 0)
            {
                BY_ERRNO[code.errno] = code;
            }
        }
    }

    private final int errno;
    private final String text;

    ErrorCode(final int errno, final String text)
    {
        this.errno = errno;
        this.text = text;
    }

    /**
     * @return the Linux errno value of this code, as carried on the wire.
     */
    public int errno()
    {
        return errno;
    }

    /**
     * @return the C library's text for this errno, as strerror(3) gives it.
     */
    public String text()
    {
        return text;
    }

    /**
     * @param errno a Linux errno value.
     * @return its code, or {@link #EUNKNOWN} when it is not in this table.
     */
    public static ErrorCode of(final int errno)
    {
        final ErrorCode code = errno >= 0 && errno < BY_ERRNO.length ? BY_ERRNO[errno] : null;
        return null == code ? EUNKNOWN : code;
    }

    /**
     * @param text a C library error text, as {@code strerror(3)} gives it and Java's file-system exceptions
     *             carry it as their reason.
     * @return its code, or {@link #EUNKNOWN} when no code of this table has that text.
     */
    public static ErrorCode ofText(final String text)
    {
        for (final ErrorCode code : values())
        {
            if (code.text.equals(text))
            {
                return code;
            }
        }
        return EUNKNOWN;
    }

    /**
     * Names an errno the way people search for it: {@code ENOMEM: Cannot allocate memory}.
     *
     * @param errno a Linux errno value.
     * @return name and text, or the number when it is not in this table.
     */
    public static String describe(final int errno)
    {
        final ErrorCode code = of(errno);
        return code == EUNKNOWN ? "errno " + errno : code.name() + ": " + code.text;
    }
}
