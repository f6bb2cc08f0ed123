package io.mrd.primary.histogram;

import io.mrd.layout.protocol.MessageType;

/**
 * What the daemon's hooks record, one call each: any thread may call, none takes a lock or allocates
 * ({@link DaemonHistograms}). Start times are {@link System#nanoTime()}; the end is read inside the call.
 */
public interface Histograms
{
    /**
     * A request of that type was answered: its reply was handed to the socket.
     *
     * @param startNs when its frame was decoded.
     */
    void requestAnswered(MessageType type, long startNs);

    /**
     * The provider registered an MR.
     *
     * @param startNs when the registration started.
     * @param bytes   the MR's length.
     */
    void registered(long startNs, long bytes);

    /**
     * The engine handled a memory free event.
     *
     * @param startNs when it started.
     */
    void memoryEventHandled(long startNs);
}
