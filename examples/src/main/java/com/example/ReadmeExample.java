package com.example;

// README.md's example ("Using mrd from a JVM worker") is the code between the two markers, verbatim:
// examples/run builds and runs it against the installed io.mrd:mrd-secondary, and mrd's ReadmeExampleTest
// compiles and runs it against a daemon and fails when the README shows anything else.
// README-BEGIN
import io.mrd.layout.MrdException;
import io.mrd.secondary.DaemonDeadException;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

public final class ReadmeExample
{
    public static void main(final String[] args)
    {
        // Attach to the daemon of a run directory ('mrd start --dir DIR'): one client per process.
        try (MrdClient client = MrdClient.attach(Path.of(args[0])))
        {
            // 64 MiB of the daemon's memory, mapped here at the same address as in the daemon.
            final MemorySegment memory = client.allocate(64L << 20);
            memory.set(JAVA_LONG, 0, 42L);

            // One cache per queue (thread). The first lookup registers the memory; later ones are local.
            final MrCache cache = client.newCache();
            final MemorySegment buffer = memory.asSlice(4096, 2048);
            final int lkey = cache.lkey(buffer);
            System.out.printf("buffer 0x%x lkey 0x%x%n", buffer.address(), lkey);

            // Give the memory back: it is deregistered, and every process's caches drop its lkey.
            client.free(memory);
        }
        catch (final DaemonDeadException ex)
        {
            System.err.println("the daemon died, stopped or restarted; attach again: " + ex.getMessage());
            System.exit(1);
        }
        catch (final MrdException ex)
        {
            System.err.println(ex.oneLine()); // e.g. "ENXIO: address 0x... is not in memory allocated from mrd"
            System.exit(1);
        }
    }
}
// README-END
