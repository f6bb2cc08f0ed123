package io.mrd.layout.protocol;

/**
 * Message types. A reply's type is its request's type with {@link #REPLY_BIT} set; {@link #ERROR} answers a
 * frame whose type could not be read.
 */
public enum MessageType
{
    HELLO(1),
    CREATE_MR(2),
    ALLOC(3),
    FREE(4),
    REG_EXTERNAL(5),
    DEREG_EXTERNAL(6),
    STOP(7),
    /** The primary asks for the fd of a REG_EXTERNAL: the next thing the client sends is the fd. */
    SEND_FD(8),
    /**
     * A secondary asks for the daemon's device: the reply carries the PD handle and, by {@code SCM_RIGHTS} with
     * the reply frame's own bytes ({@code FLAG_FD}), a descriptor of the device's command file.
     */
    IMPORT_PD(9),
    /** A secondary reports a completion queue or queue pair it created or destroyed in the imported device. */
    QUEUES(10),
    ERROR(0x7FFF);

    /** Set in the type of every reply. */
    public static final int REPLY_BIT = 0x8000;

    private static final MessageType[] BY_CODE = new MessageType[11];

    static
    {
        for (final MessageType type : values())
        {
            if (type.code < BY_CODE.length)
            {
                BY_CODE[type.code] = type;
            }
        }
    }

    private final int code;

    MessageType(final int code)
    {
        this.code = code;
    }

    public int code()
    {
        return code;
    }

    public int replyCode()
    {
        return code | REPLY_BIT;
    }

    /**
     * Whether a client sends this request again to the daemon's successor (docs/adoption.md) when the connection
     * it went out on ended without its reply: every request a client makes but {@link #REG_EXTERNAL}, whose
     * descriptor went to the daemon that is gone. {@link #STOP} is an operator's, {@link #HELLO} opens a connection
     * and {@link #SEND_FD} is the daemon's. The daemon leaves such a request unanswered when it closes before it
     * could run it, rather than failing it.
     *
     * @return true for ALLOC, FREE, CREATE_MR, DEREG_EXTERNAL, IMPORT_PD and QUEUES.
     */
    public boolean sentAgainToSuccessor()
    {
        return switch (this)
        {
            case ALLOC, FREE, CREATE_MR, DEREG_EXTERNAL, IMPORT_PD, QUEUES -> true;
            case HELLO, REG_EXTERNAL, STOP, SEND_FD, ERROR -> false;
        };
    }

    /**
     * @param code a type field with the reply bit cleared.
     * @return the type, or null when unknown.
     */
    public static MessageType of(final int code)
    {
        if (code == ERROR.code)
        {
            return ERROR;
        }
        return code > 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    }
}
