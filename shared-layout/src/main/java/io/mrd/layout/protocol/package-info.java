/**
 * The socket protocol between a client and the daemon: the frame layout ({@code FrameDescriptor}), the message
 * types ({@code MessageType}), the decoded messages ({@code Message}, {@code Frame}) and their one codec
 * ({@code FrameCodec}), which checks every length before it reads and fails only with EPROTO.
 * <p>
 * Belongs here: what goes over the socket, byte for byte, and the limits both sides enforce. Does not belong
 * here: what either side does with a request (the daemon's handlers are in {@code primary/server}, the client's
 * calls in {@code secondary}), the socket itself and fd passing, or the status codes, which are shared with the
 * control file and live in {@code io.mrd.layout.ErrorCode}.
 */
package io.mrd.layout.protocol;
