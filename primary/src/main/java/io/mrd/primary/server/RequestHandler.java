package io.mrd.primary.server;

import io.mrd.layout.Access;
import io.mrd.layout.EmulatedDeviceAdvice;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.WholeBuffer;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.external.ExternalRegistrations;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.mr.MrEngine;
import io.mrd.primary.provider.SharedDevice;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * What each request does, on a worker thread: the checks of its fields, the call to the engine or to external
 * memory, and the reply. Failures are {@link MrdException}s that the caller answers with their code and
 * message. Thread-safe (the engine and external memory are).
 * <p>
 * Concurrent CREATE_MRs for one range need nothing here: the engine marks a range in flight while it registers
 * it, and a later request for it waits and then finds the MR the earlier one made.
 */
final class RequestHandler
{
    private static final Logger LOG = LoggerFactory.getLogger(RequestHandler.class);

    private final MrEngine engine;
    private final ExternalRegistrations external;
    private final String provider;
    /** The devices secondaries import, by device number; empty for a provider without one. */
    private final List<SharedDevice> devices;
    private final QueueOwners queues = new QueueOwners();
    /** The log says once per daemon that gone clients' queues cannot be destroyed. */
    private final AtomicBoolean toldQueuesOutlive = new AtomicBoolean();

    RequestHandler(
        final MrEngine engine, final ExternalRegistrations external, final String provider,
        final List<SharedDevice> devices)
    {
        this.engine = engine;
        this.external = external;
        this.provider = provider;
        this.devices = List.copyOf(devices);
    }

    /**
     * @return device {@code number} as secondaries import it.
     * @throws MrdException EOPNOTSUPP naming the provider that has one, for a daemon without a device; EINVAL for
     *                      a number that is not one of its devices.
     */
    SharedDevice sharedDevice(final String request, final int number)
    {
        if (devices.isEmpty())
        {
            throw new MrdException(ErrorCode.EOPNOTSUPP, request + " needs the daemon's RDMA device, and this " +
                "daemon runs --provider " + provider + ", which has none: start it with --provider ibverbs (on a " +
                "host without an RDMA NIC, on " + EmulatedDeviceAdvice.EMULATED_DEVICE + ")");
        }
        if (number < 0 || number >= devices.size())
        {
            throw new MrdException(ErrorCode.EINVAL, request + " names device " + number + ", and the daemon has " +
                devices.size() + " (" + String.join(", ", devices.stream().map(SharedDevice::deviceName).toList()) +
                "): name one of 0 to " + (devices.size() - 1));
        }
        return devices.get(number);
    }

    /**
     * @return queues clients reported and still hold.
     */
    int reportedQueues()
    {
        return queues.size();
    }

    /**
     * Runs a request other than HELLO, STOP and REG_EXTERNAL (which need the connection).
     */
    Message.Reply execute(final Message.Request request, final int clientId, final int clientPid)
    {
        return switch (request)
        {
            case Message.CreateMr m -> createMr(m.address(), m.length(), clientId);
            case Message.Alloc m -> allocate(m.length(), m.access(), m.register(), clientId);
            case Message.Free m ->
            {
                engine.freeMemory(m.address(), m.length(), clientId);
                yield new Message.Status(MessageType.FREE, ErrorCode.OK, "");
            }
            case Message.DeregExternal m ->
            {
                external.deregister(m.address(), clientId);
                yield new Message.Status(MessageType.DEREG_EXTERNAL, ErrorCode.OK, "");
            }
            case Message.Queues m ->
            {
                final SharedDevice shared = sharedDevice("QUEUES", m.device());
                // After the request's own checks (QueueOwners names a wrong kind or operation first).
                if (m.operation() == Message.Queues.ADD &&
                    (m.kind() == Message.Queues.CQ || m.kind() == Message.Queues.QP))
                {
                    shared.requireCreatedBy(m.kind(), m.handle(), clientPid);
                }
                queues.apply(clientId, m);
                yield new Message.Status(MessageType.QUEUES, ErrorCode.OK, "");
            }
            case Message.ImportPd m -> throw new IllegalArgumentException("IMPORT_PD is answered by the session");
            case Message.Hello m -> throw new IllegalArgumentException("HELLO is answered by the session");
            case Message.Stop m -> throw new IllegalArgumentException("STOP is answered by the session");
            case Message.RegExternal m -> throw new IllegalArgumentException("REG_EXTERNAL needs its fd");
        };
    }

    private Message.Reply createMr(final long address, final long length, final int clientId)
    {
        if (!createFieldsValid(address, length))
        {
            throw new MrdException(ErrorCode.EINVAL, "CREATE_MR for a buffer at " + Sizes.hex(address) + " of " +
                length + " bytes: the address must be positive, the length not negative, and the end must not wrap");
        }
        final MrEntry entry = external.holds(address) ? external.lookup(address) : engine.createMr(address, clientId);
        if (!entry.containsRange(address, length))
        {
            throw WholeBuffer.straddles(address, length, entry.end);
        }
        return created(entry);
    }

    /**
     * @return true when CREATE_MR's fields may be looked up: a positive address, a length not negative, an end
     *         that does not wrap.
     */
    static boolean createFieldsValid(final long address, final long length)
    {
        return address > 0 && length >= 0 && length <= Long.MAX_VALUE - address;
    }

    /**
     * @return CREATE_MR's reply for the entry holding the buffer, on a worker or on the event loop
     *         ({@link ExistingMrReply}).
     */
    static Message.MrCreated created(final MrEntry entry)
    {
        return new Message.MrCreated(ErrorCode.OK, "", entry.start, entry.end, entry.lkey, entry.rkey, entry.access);
    }

    /**
     * ALLOC: the memory gets the access its owner asks for, and local write (all mrd memory is writable, and
     * verbs refuses remote write or atomic without it); unknown bits are refused with EINVAL naming them.
     * With {@code register}, the MR is created before the reply, so the reply carries its keys and the global
     * cache already holds its entry when the client reads them. The MR must hold the whole allocation (the keys
     * are the handle's): an allocation longer than the provider registers in one MR is refused before it is made; if
     * registration fails or does not, the allocation is freed again (which detaches whatever MR was made) and the
     * error returned: never memory allocated without the keys asked for.
     */
    private Message.Reply allocate(final long length, final int access, final boolean register, final int clientId)
    {
        if (register)
        {
            engine.checkRegistersInOneMr(length);
        }
        final Allocation allocation = engine.allocate(length, clientId, placed(access, "ALLOC"));
        if (!register)
        {
            return new Message.Allocated(ErrorCode.OK, "", allocation.address(), allocation.length(),
                allocation.access());
        }
        try
        {
            final MrEntry entry = engine.createMr(allocation.address(), clientId);
            if (!entry.containsRange(allocation.address(), allocation.length()))
            {
                throw new MrdException(ErrorCode.EAGAIN, "ALLOC with registration of " +
                    Sizes.format(allocation.length()) + " at " + Sizes.hex(allocation.address()) + ": its MR covers " +
                    "only [" + Sizes.hex(entry.start) + ", " + Sizes.hex(entry.end) + "), because the daemon " +
                    "runs --no-mr-ext-memseg (one MR per segment) or a neighbouring allocation changed its " +
                    "chunk meanwhile: retry, or allocate without registration and look keys up per buffer");
            }
            return new Message.Allocated(ErrorCode.OK, "", allocation.address(), allocation.length(),
                allocation.access(), true, entry.lkey, entry.rkey);
        }
        catch (final RuntimeException ex)
        {
            try
            {
                engine.freeMemory(allocation.address(), allocation.length(), clientId);
            }
            catch (final RuntimeException suppressed)
            {
                ex.addSuppressed(suppressed);
            }
            throw ex;
        }
    }

    /**
     * @return the access granted for {@code access}, whose placement names only devices of this daemon (a
     * daemon without a device has device 0 alone: its registrations).
     * @throws MrdException EINVAL for unknown flags or a device the daemon does not have.
     */
    private int placed(final int access, final String what)
    {
        final int granted = Access.granted(access, what);
        Access.requirePlacedWithin(granted, Math.max(1, devices.size()), what);
        return granted;
    }

    /**
     * The checks of REG_EXTERNAL that need no fd, made before the session asks for one.
     *
     * @return null when the length and access may be registered, else what is wrong with them.
     */
    String checkExternal(final long length, final int access)
    {
        try
        {
            placed(access, "REG_EXTERNAL");
        }
        catch (final MrdException ex)
        {
            return ex.getMessage();
        }
        return external.checkLength(length);
    }

    /**
     * Registers the client's fd as external memory with {@code access} (plus local write). Always closes
     * {@code fd}.
     */
    Message.Reply registerExternal(final long length, final int access, final int fd, final int clientId)
    {
        final MrEntry entry = external.register(length, fd, clientId, access);
        return new Message.ExternalRegistered(ErrorCode.OK, "", entry.start, length, entry.lkey, entry.rkey,
            entry.access);
    }

    /**
     * Frees everything a gone client owned: the queues it reported (first, so that no work of its own still
     * runs on the memory that goes next), allocations (as memory free events), external registrations and
     * their mappings.
     *
     * @return what was freed, for the log.
     */
    String reclaim(final int clientId, final int clientPid)
    {
        final String queuesGone = destroyQueues(clientId, clientPid);
        final List<FreedRange> freed = engine.reclaim(clientId);
        final ExternalRegistrations.Reclaimed externals = external.reclaim(clientId);
        final long bytes = freed.stream().mapToLong(FreedRange::length).sum();
        return (freed.isEmpty() && externals.registrations() == 0 ? "freed nothing" :
            "freed " + Sizes.format(bytes) + " in " + freed.size() + " range" + (freed.size() == 1 ? "" : "s") +
            " and " + externals.registrations() + " external registration" +
            (externals.registrations() == 1 ? "" : "s") + " (" + Sizes.format(externals.bytes()) + ")") + queuesGone;
    }

    /**
     * Destroys, by handle, the queues a gone client reported and did not destroy; no lock is held meanwhile. A
     * handle the device refuses is logged and skipped: the daemon never fails for what a client reported.
     *
     * @return what became of them, for the log ("" when it reported none).
     */
    private String destroyQueues(final int clientId, final int clientPid)
    {
        final List<QueueOwners.Queue> left = queues.release(clientId);
        if (left.isEmpty() || devices.isEmpty())
        {
            return "";
        }
        // Destroying by handle is the library's (the emulated device's) or no device's.
        if (!devices.getFirst().destroysByHandle())
        {
            if (toldQueuesOutlive.compareAndSet(false, true))
            {
                LOG.warn("{}", devices.getFirst().whyQueuesOutliveTheirClient().orElseThrow());
            }
            return "; " + left.size() + " queue" + (left.size() == 1 ? "" : "s") + " left live in the device";
        }
        int destroyed = 0;
        for (final QueueOwners.Queue queue : left)
        {
            try
            {
                // A reported device number was checked when the queue was added.
                final SharedDevice shared = devices.get(queue.device());
                // Again now: an index the client reported may since name another process's queue.
                shared.requireCreatedBy(queue.kind(), queue.handle(), clientPid);
                shared.destroyQueue(queue.kind(), queue.handle());
                destroyed++;
            }
            catch (final MrdException ex)
            {
                LOG.warn("client {}'s {}: {}", clientId, queue.describe(), ex.oneLine());
            }
        }
        return "; destroyed " + destroyed + " of its " + left.size() + " queue" + (left.size() == 1 ? "" : "s");
    }
}
