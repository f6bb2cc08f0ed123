package io.mrd.bench.multi;

import io.mrd.layout.Access;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The client whose registration is in flight: on {@code register K} it allocates {@code LENGTH} bytes with
 * remote access (so that its MR covers exactly this allocation and no other client's memory), prints
 * {@code REGISTERING K}, looks up the key of the whole allocation (a miss: {@code CREATE_MR}, a registration
 * that the daemon's {@code --registration-latency} makes slow), prints {@code REGISTERED K}, frees the memory
 * and prints {@code RESULT run=K} with the seconds of the registration and of the free. {@code quit} exits.
 * <p>
 * Arguments: {@code DIR LENGTH}.
 */
public final class RegistrarMain
{
    static final String REGISTERING = "REGISTERING ";
    static final String REGISTERED = "REGISTERED ";

    private RegistrarMain()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final Path dir = Path.of(args[0]);
        final long length = Long.parseLong(args[1]);
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).requestTimeoutMs(60_000)))
        {
            final MrCache cache = client.newCache();
            Handshake.obey(words ->
            {
                if (words.length != 2 || !words[0].equals("register"))
                {
                    return false;
                }
                final MemorySegment memory = client.allocate(length, Access.REMOTE_READ | Access.REMOTE_WRITE);
                System.out.println(REGISTERING + words[1]);
                System.out.flush();
                final long start = System.nanoTime();
                cache.lkey(memory.address(), length);
                final long registered = System.nanoTime();
                System.out.println(REGISTERED + words[1]);
                System.out.flush();
                client.free(memory);
                final long freed = System.nanoTime();
                final Map<String, Object> result = new LinkedHashMap<>();
                result.put("run", words[1]);
                result.put("register", String.format(Locale.ROOT, "%.3f", (registered - start) / 1e9));
                result.put("free", String.format(Locale.ROOT, "%.3f", (freed - registered) / 1e9));
                Handshake.print(result);
                return true;
            });
        }
    }
}
