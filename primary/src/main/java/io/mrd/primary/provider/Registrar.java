package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.MrdException;

import java.util.List;
import java.util.Optional;

/**
 * The registration provider SPI: what turns a range of memory into keys a NIC
 * accepts. One instance per daemon, owned by the MR engine.
 * <p>
 * Threading: {@link #register} and {@link #deregister} may be called from several
 * worker threads at once, and may be slow (tens of µs plus ~80–100 ms per GB for
 * {@code ibv_reg_mr}); the engine never calls them while holding the seqlock or
 * the memory lock for writing.
 */
public interface Registrar extends AutoCloseable
{
    /**
     * @return the provider's name as {@code --provider} takes it and the control file records it.
     */
    String name();

    /**
     * Registers (pins and keys) {@code [address, address + length)}.
     *
     * @param access {@link Access} flags: the memory's, and optional ones (relaxed ordering).
     * @return the registration; its rkey is {@link Access#NO_RKEY} unless {@code access} has a remote flag, so
     *         that no key that grants nothing is handed out.
     * @throws MrdException ENOMEM when a pin limit would be exceeded (the message names the limit and its
     *                      value), EINVAL for a range the provider refuses, or the provider's own error.
     */
    Registration register(long address, long length, int access);

    /**
     * Takes over a registration a predecessor daemon made and recorded in the control file, so that its keys stay
     * valid: {@code ibverbs} names the MR by its device handle and checks it is the recorded one; {@code soft}
     * pins the range again (a dead process's {@code mlock} is gone) and keeps the recorded keys. The result is
     * deregistered as a registration of this provider.
     *
     * @param recorded what the control file records: range, keys, device handle.
     * @param access   the {@link Access} of the memory, as recorded.
     * @throws MrdException when the registration cannot be taken over (the message says why); nothing is kept.
     */
    Registration adopt(Registration recorded, int access);

    /**
     * Releases a registration made by {@link #register}. Never called twice for one registration.
     *
     * @throws MrdException when the provider fails; the registration is gone from mrd's tables either way.
     */
    void deregister(Registration registration);

    /**
     * @return the longest range one {@link #register} call accepts: the device's {@code max_mr_size} for
     * {@code ibverbs}. The engine splits longer ranges into several MRs, each at most this long and starting on
     * a segment boundary.
     */
    default long maxRegionLength()
    {
        return Long.MAX_VALUE;
    }

    /**
     * @return bytes currently pinned by live registrations.
     */
    long pinnedBytes();

    /**
     * @return the device and protection domain secondaries import to post with this provider's keys
     * ({@code IMPORT_PD}); empty for a provider without a device ({@code soft}).
     */
    default Optional<SharedDevice> sharedDevice()
    {
        return Optional.empty();
    }

    /**
     * @return every device and its protection domain, in device order (device 0 is {@link #sharedDevice()});
     * empty for a provider without a device.
     */
    default List<SharedDevice> sharedDevices()
    {
        return sharedDevice().stream().toList();
    }

    /**
     * The last moment a registration may be refused: the engine calls it with no lock held after
     * {@link #register} and before it publishes the keys, and deregisters the registration when it throws. Only
     * fault injection refuses ({@link FaultPoint.Step#PUBLISH}), so that a test can check the undo of a
     * registration every device made.
     *
     * @throws MrdException the injected failure.
     */
    default void beforePublish(final Registration registration)
    {
    }

    /**
     * Releases the provider (protection domain, device). Registrations still live are the caller's bug.
     */
    void close();
}
