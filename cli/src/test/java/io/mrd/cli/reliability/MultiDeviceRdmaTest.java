package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.ExternalMemory;
import io.mrd.secondary.KeyPair;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;
import io.mrd.secondary.pool.BufferPool;
import io.mrd.secondary.pool.PoolContext;
import io.mrd.secondary.pool.PooledBuffer;
import io.mrd.secondary.verbs.CompletionQueue;
import io.mrd.secondary.verbs.Opcode;
import io.mrd.secondary.verbs.QpCaps;
import io.mrd.secondary.verbs.QueuePair;
import io.mrd.secondary.verbs.SgeList;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.secondary.verbs.WorkCompletions;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.LiveObjects;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A daemon on two emulated devices ({@code MRDEMU_DEVICES=2}, {@code --device all}) and this JVM as its
 * secondary, crossing devices inside one process: memory the daemon registered once has keys on each device
 * ({@code RegisteredMemory.keys}, a cache per device, a CREATE_MR made by device 1's cache), a loopback pair of
 * queue pairs on each device moves data with that device's keys, and the other device's lkey or rkey, posted on
 * purpose, is refused (the emulated device's keys name the device that issued them) without a byte moved.
 * <p>
 * The emulated devices are not cabled to each other: each is its own loopback fabric, so the pairs are within a
 * device (docs/multi-device.md).
 */
final class MultiDeviceRdmaTest
{
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final int LENGTH = 64 * 1024;
    private static final int KEY_DEVICE_SHIFT = 26;

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private final Path dir = daemons.newDirectory("multi-device");

    @Test
    void eachDeviceMovesDataWithItsOwnKeysAndRefusesTheOthers()
    {
        final Path library = EmulatedDevice.library();
        try (LiveDaemon daemon = startOnTwoDevices(library, "multi-device");
            MrdClient client = attach(library, "crossing"))
        {
            assertEquals(2, client.deviceCount());
            assertEquals("mrdemu0", client.deviceName(0));
            assertEquals("mrdemu1", client.deviceName(1));

            final int access = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;
            final RegisteredMemory src = client.allocateRegistered(LENGTH, access);
            final RegisteredMemory dst = client.allocateRegistered(LENGTH, access);
            assertKeysOfTheirDevice(src);
            assertKeysOfTheirDevice(dst);
            assertEquals(2, daemon.counter(MrdCounter.MRS_ACTIVE), "one MR per allocation, whatever the devices");

            // A cache per device: each answers with its own device's keys, the MRU hit included.
            final MrCache cache0 = client.newCache(0);
            final MrCache cache1 = client.newCache(1);
            for (int round = 0; round < 2; round++)
            {
                assertEquals(KeyPair.lkey(src.keys(0)), cache0.lkey(src.segment().address() + 100, 64));
                assertEquals(KeyPair.lkey(src.keys(1)), cache1.lkey(src.segment().address() + 100, 64));
            }
            // A miss of device 1's cache on memory no MR covers: CREATE_MR, then device 1's row of the key table.
            final MemorySegment plain = client.allocate(LENGTH);
            final int plainKey1 = cache1.lkey(plain.address(), 64);
            assertEquals(1, plainKey1 >>> KEY_DEVICE_SHIFT, "device 1's cache gives device 1's key after CREATE_MR");
            assertNotEquals(plainKey1, client.newCache(0).lkey(plain.address(), 64));

            final MrdException noSuchDevice = assertThrows(MrdException.class, () -> client.newCache(2));
            assertEquals(ErrorCode.EINVAL, noSuchDevice.code());
            assertTrue(noSuchDevice.getMessage().contains("device 2 is not one of the daemon's 2 devices: " +
                "0 (mrdemu0), 1 (mrdemu1)"), noSuchDevice.oneLine());
            assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> client.verbs(2)).code());

            for (int device = 0; device < 2; device++)
            {
                final Verbs verbs = client.verbs(device);
                assertEquals("mrdemu" + device, verbs.deviceName());
                final int other = 1 - device;
                fill(src, (byte)('a' + device));
                assertEquals(WorkCompletions.SUCCESS, write(verbs, src, src.keys(device), dst, dst.keys(device)),
                    "a write on mrdemu" + device + " with its own keys");
                assertBytes(dst, (byte)('a' + device), "the write on mrdemu" + device);

                fill(dst, (byte)0);
                assertEquals(WorkCompletions.LOC_PROT_ERR, write(verbs, src, src.keys(other), dst,
                    dst.keys(device)), "mrdemu" + other + "'s lkey on mrdemu" + device);
                assertBytes(dst, (byte)0, "a write with mrdemu" + other + "'s lkey");
                assertEquals(WorkCompletions.REM_ACCESS_ERR, write(verbs, src, src.keys(device), dst,
                    dst.keys(other)), "mrdemu" + other + "'s rkey on mrdemu" + device);
                assertBytes(dst, (byte)0, "a write to mrdemu" + other + "'s rkey");
                assertEquals(new LiveObjects(1, 3, 0, 0), LiveObjects.of(library, verbs.context()),
                    "mrdemu" + device + " holds the daemon's PD and the three MRs, no queue left");
            }
            client.free(src);
            client.free(dst);
            client.free(plain);
            Wait.await("every MR deregistered on both devices", WAIT, () ->
                LiveObjects.of(library, client.verbs(0).context()).mrs() +
                    LiveObjects.of(library, client.verbs(1).context()).mrs(), mrs -> mrs == 0);
            daemon.assertHealthy("at the end");
        }
    }

    /**
     * {@code Access.onDevices}: memory placed on device 1 alone is an MR there and none on device 0; its keys and
     * a cache of device 1 move data on device 1, while device 0's keys and cache refuse it by name (a pool's
     * buffers and external memory of that placement too), and a placement past the daemon's devices is refused
     * at ALLOC. {@code mrd check} finds the MR key table right.
     */
    @Test
    void memoryPlacedOnOneDeviceIsRegisteredThereAlone()
    {
        final Path library = EmulatedDevice.library();
        try (LiveDaemon daemon = startOnTwoDevices(library, "placed");
            MrdClient client = attach(library, "placed"))
        {
            final int access = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.onDevices(1);
            final RegisteredMemory src = client.allocateRegistered(LENGTH, access);
            final RegisteredMemory dst = client.allocateRegistered(LENGTH, access);
            assertEquals(1, KeyPair.lkey(src.keys(1)) >>> KEY_DEVICE_SHIFT, "device 1's lkey: " + src);
            assertEquals(new LiveObjects(1, 0, 0, 0), LiveObjects.of(library, client.verbs(0).context()),
                "mrdemu0: the daemon's PD, no MR");
            assertEquals(new LiveObjects(1, 2, 0, 0), LiveObjects.of(library, client.verbs(1).context()),
                "mrdemu1: the daemon's PD and the two MRs");

            final MrdException keys0 = assertThrows(MrdException.class, () -> src.keys(0));
            assertEquals(ErrorCode.EINVAL, keys0.code());
            assertTrue(keys0.getMessage().contains("the memory is not registered on device 0"), keys0.oneLine());
            assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, src::lkey).code(),
                "the one-device lkey is device 0's");

            assertEquals(KeyPair.lkey(src.keys(1)), client.newCache(1).lkey(src.segment().address() + 64, 64));
            final MrdException cache0 = assertThrows(MrdException.class,
                () -> client.newCache(0).lkey(src.segment().address() + 64, 64));
            assertEquals(ErrorCode.EINVAL, cache0.code());
            assertTrue(cache0.getMessage().contains("is in memory placed on other devices than this cache's " +
                "device 0 (access local-write,remote-write,device-1)"), cache0.oneLine());

            fill(src, (byte)'p');
            assertEquals(WorkCompletions.SUCCESS, write(client.verbs(1), src, src.keys(1), dst, dst.keys(1)),
                "a write on mrdemu1 with the keys of its placement");
            assertBytes(dst, (byte)'p', "the write on mrdemu1");

            // A pool of that placement: its buffers carry device 1's keys, and refuse device 0's.
            try (BufferPool pool = BufferPool.open(client, new PoolContext().access(access)))
            {
                final PooledBuffer buffer = pool.acquire(4096);
                assertEquals(1, KeyPair.lkey(buffer.keys(1)) >>> KEY_DEVICE_SHIFT, "a pooled buffer's device 1 lkey");
                assertEquals(KeyPair.lkey(buffer.keys(1)), client.newCache(1).lkey(buffer.address(), 4096));
                assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, buffer::lkey).code());
                assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> buffer.keys(0)).code());
                buffer.release();
            }

            // External memory of that placement: an MR on device 1 alone too.
            final ExternalMemory external = client.registerMemfd(LENGTH, access);
            assertEquals(1, KeyPair.lkey(external.keys(1)) >>> KEY_DEVICE_SHIFT, "external memory's device 1 lkey");
            assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, external::lkey).code());
            assertEquals(new LiveObjects(1, 0, 0, 0), LiveObjects.of(library, client.verbs(0).context()),
                "mrdemu0: still no MR");
            client.deregisterExternal(external);

            final MrdException past = assertThrows(MrdException.class,
                () -> client.allocateRegistered(LENGTH, Access.LOCAL_WRITE | Access.onDevices(0, 2)));
            assertEquals(ErrorCode.EINVAL, past.code());
            assertTrue(past.getMessage().contains("ALLOC places the memory on device 2, and the daemon has 2 " +
                "devices (0 to 1)"), past.oneLine());
            daemon.assertHealthy("with memory placed on device 1");
            final String dump = daemon.mrd("dump").out();
            assertTrue(dump.contains("device 0 mrdemu0      not placed (no MR)"), dump);
            final String lookup = daemon.mrd("lookup", "0x" + Long.toHexString(src.segment().address())).out();
            assertTrue(lookup.contains("device 0 mrdemu0      not placed (access local-write,remote-write,device-1)"),
                lookup);

            client.free(src);
            client.free(dst);
            Wait.await("both MRs deregistered on mrdemu1", WAIT, () ->
                LiveObjects.of(library, client.verbs(1).context()).mrs(), mrs -> mrs == 0);
            daemon.assertHealthy("at the end");
        }
    }

    /** A daemon on {@code mrdemu0} and {@code mrdemu1} ({@code MRDEMU_DEVICES=2}, {@code --device all}). */
    private LiveDaemon startOnTwoDevices(final Path library, final String name)
    {
        final Map<String, String> env = Map.of(EmulatedDevice.LIBRARY_ENV, library.toString(),
            EmulatedDevice.DEVICES_ENV, "2");
        return daemons.launch(name).in(dir).env(env).start(SoakTest.with(SoakTest.SLOW_MACHINE, "--provider",
            "ibverbs", "--device", "all", "--max-memory", "256MiB", "--list-size", "64MiB"));
    }

    private MrdClient attach(final Path library, final String name)
    {
        return MrdClient.attach(new ClientContext().dir(dir).name(name).ibverbsLibrary(library.toString()));
    }

    private static void assertKeysOfTheirDevice(final RegisteredMemory memory)
    {
        assertEquals(2, memory.deviceCount());
        for (int device = 0; device < 2; device++)
        {
            final long keys = memory.keys(device);
            assertEquals(device, KeyPair.lkey(keys) >>> KEY_DEVICE_SHIFT, "lkey of device " + device + ": " + memory);
            assertEquals(device, KeyPair.rkey(keys) >>> KEY_DEVICE_SHIFT, "rkey of device " + device + ": " + memory);
        }
        assertEquals(memory.keyPair(), memory.keys(0), "the one-device keys are device 0's");
    }

    /**
     * One RDMA WRITE of the whole source into the whole destination on a fresh loopback pair of {@code verbs}
     * (an error moves a pair to the error state), the queues destroyed after.
     *
     * @return the completion's status.
     */
    private static int write(final Verbs verbs, final RegisteredMemory src, final long srcKeys,
        final RegisteredMemory dst, final long dstKeys)
    {
        try (CompletionQueue cq = verbs.createCq(8);
            QueuePair a = verbs.createRcQp(cq, cq, QpCaps.of(4, 1));
            QueuePair b = verbs.createRcQp(cq, cq, QpCaps.of(4, 1)))
        {
            a.connect(b.qpNum());
            b.connect(a.qpNum());
            final SgeList sges = new SgeList(1).add(src.segment().address(), LENGTH, KeyPair.lkey(srcKeys));
            a.postSend(7, Opcode.RDMA_WRITE, sges, dst.segment().address(), KeyPair.rkey(dstKeys), true);
            final WorkCompletions completions = new WorkCompletions(1);
            Wait.await("the write's completion", WAIT, () -> cq.poll(completions), polled -> polled > 0);
            assertEquals(7, completions.wrId(0));
            return completions.status(0);
        }
    }

    private static void fill(final RegisteredMemory memory, final byte value)
    {
        memory.segment().fill(value);
    }

    private static void assertBytes(final RegisteredMemory memory, final byte value, final String what)
    {
        for (long i = 0; i < LENGTH; i++)
        {
            if (memory.segment().get(ValueLayout.JAVA_BYTE, i) != value)
            {
                throw new AssertionError(what + ": byte " + i + " is " + memory.segment().get(ValueLayout.JAVA_BYTE,
                    i) + ", not " + value);
            }
        }
    }
}
