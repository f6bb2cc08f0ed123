package io.mrd.layout;

/**
 * The one exception type of mrd: an {@link ErrorCode} (the protocol's status)
 * and a message that names the value that was wrong and what to do about it.
 */
public class MrdException extends RuntimeException
{
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;

    public MrdException(final ErrorCode code, final String message)
    {
        super(message);
        this.code = code;
    }

    public MrdException(final ErrorCode code, final String message, final Throwable cause)
    {
        super(message, cause);
        this.code = code;
    }

    /**
     * @return the status this failure carries on the wire.
     */
    public ErrorCode code()
    {
        return code;
    }

    /**
     * @return {@code CODE: message}, the one-line form used in replies, logs and CLI errors.
     */
    public String oneLine()
    {
        return code.name() + ": " + getMessage();
    }

    public String toString()
    {
        return getClass().getSimpleName() + "[" + oneLine() + "]";
    }
}
