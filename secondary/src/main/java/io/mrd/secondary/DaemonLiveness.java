package io.mrd.secondary;

/**
 * Whether the daemon a client's keys and device came from is still there, as the one check that every part of
 * the client which hands out a key or posts to the daemon's device makes.
 * <p>
 * <b>The loss rule.</b> Once the client knows its daemon is lost (it died, stopped or restarted:
 * {@link MrdClient}'s class comment says how that is found), every call that hands out a key, needs the daemon or
 * uses its device throws {@link DaemonDeadException}, and changes nothing: {@link MrCache} lookups,
 * {@link RegisteredMemory} and {@link ExternalMemory} keys, every request of {@link MrdClient}, the pool's
 * {@code acquire} and its buffers' keys, and the verbs ({@code createCq}, {@code createRcQp}, {@code connect},
 * {@code postSend}, {@code postRecv}, {@code poll}). Every {@code close()} succeeds in the README's order
 * (buffers, pools, queue pairs, CQs, the client): it gives back what is this process's and leaves the rest to the
 * daemon's end (a pool's slabs and the client's memory stay mapped until
 * {@link MrdClient#close()}). Reads and writes of the client's memory do not fault until then: the pages are
 * still the daemon's files, and peers that hold an rkey may still reach them while this process holds the
 * device, so nothing read there after a loss is to be trusted.
 * <p>
 * {@link MrdClient#liveness()} is a client's; {@link #UNWATCHED} is for memory and devices used without a
 * daemon (tests, benchmarks). One volatile read.
 */
@FunctionalInterface
public interface DaemonLiveness
{
    /** Never throws: for keys and devices that no daemon stands behind. */
    DaemonLiveness UNWATCHED = () ->
    {
    };

    /**
     * @throws DaemonDeadException once the daemon is known lost; an {@link io.mrd.layout.MrdException} EBADF once
     *                             the client is closed.
     */
    void requireAlive();
}
