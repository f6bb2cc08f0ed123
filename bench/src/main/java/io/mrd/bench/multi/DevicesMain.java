package io.mrd.bench.multi;

import io.mrd.layout.Access;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.KeyPair;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The client of the allocate-and-register rows of several devices ({@link DevicesBench}): one
 * {@link MrdClient#allocateRegistered(long, int)}, which the daemon populates once and registers on each of its
 * devices, timed from the request to holding the keys. Before answering it checks that the memory has a key
 * pair on every device of the daemon and that no two devices gave the same lkey. The memory is then freed
 * (not timed), so every allocation starts from fresh pages. A 64 MiB allocation comes first, untimed, so that
 * neither the first request of a connection nor class loading is in a measurement; then it prints READY and
 * obeys its standard input: {@code alloc K MIB} allocates MIB MiB and prints {@code RESULT run=K ms=...
 * devices=N freeMs=...}; {@code quit} exits.
 * <p>
 * Arguments: {@code DIR}.
 */
public final class DevicesMain
{
    /** What the C reference registers with: local write, remote write and read. */
    static final int ACCESS = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;
    /** Long enough for 1 GiB registered on 8 emulated devices on a loaded machine. */
    private static final long REQUEST_TIMEOUT_MS = 120_000;

    private DevicesMain()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final Path dir = Path.of(args[0]);
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).requestTimeoutMs(REQUEST_TIMEOUT_MS)))
        {
            allocate(client, 64 * Sizes.MIB);
            Handshake.obey(words ->
            {
                if (words.length != 3 || !words[0].equals("alloc"))
                {
                    return false;
                }
                final long length = Long.parseLong(words[2]) * Sizes.MIB;
                final double[] times = allocate(client, length);
                final Map<String, Object> result = new LinkedHashMap<>();
                result.put("run", Integer.parseInt(words[1]));
                result.put("ms", String.format(Locale.ROOT, "%.1f", times[0]));
                result.put("devices", client.deviceCount());
                result.put("freeMs", String.format(Locale.ROOT, "%.1f", times[1]));
                System.out.printf(Locale.ROOT, "%s MiB on %d devices: allocateRegistered %.1f ms, free %.1f ms%n",
                    words[2], client.deviceCount(), times[0], times[1]);
                Handshake.print(result);
                return true;
            });
        }
    }

    /**
     * @return milliseconds from the request to the keys, and milliseconds of the free.
     */
    private static double[] allocate(final MrdClient client, final long length)
    {
        final long start = System.nanoTime();
        final RegisteredMemory memory = client.allocateRegistered(length, ACCESS);
        final long keyed = System.nanoTime();
        try
        {
            requireKeysOnEveryDevice(client, memory);
        }
        finally
        {
            client.free(memory);
        }
        return new double[] {(keyed - start) / 1e6, (System.nanoTime() - keyed) / 1e6};
    }

    private static void requireKeysOnEveryDevice(final MrdClient client, final RegisteredMemory memory)
    {
        final Set<Integer> lkeys = new HashSet<>();
        for (int device = 0; device < client.deviceCount(); device++)
        {
            final int lkey = KeyPair.lkey(memory.keys(device));
            if (!lkeys.add(lkey))
            {
                throw new IllegalStateException("device " + device + " gave lkey 0x" + Integer.toHexString(lkey) +
                    ", as another device did: " + memory);
            }
        }
    }
}
