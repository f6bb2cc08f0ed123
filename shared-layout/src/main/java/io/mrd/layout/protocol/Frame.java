package io.mrd.layout.protocol;

/**
 * A decoded frame.
 *
 * @param correlationId what the reply echoes.
 * @param flags         {@link FrameDescriptor#FLAG_FD} or 0.
 * @param message       the body.
 */
public record Frame(long correlationId, int flags, Message message)
{
}
