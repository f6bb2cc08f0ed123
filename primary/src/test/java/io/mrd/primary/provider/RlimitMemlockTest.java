package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.Equipment;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.mrd.layout.sys.Sizes.KIB;
import static io.mrd.layout.sys.Sizes.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The kernel's own limit, not mrd's: in a child JVM whose RLIMIT_MEMLOCK is 1 MiB and that lacks CAP_IPC_LOCK,
 * the soft provider pins up to the limit and past it fails with ENOMEM naming RLIMIT_MEMLOCK and its value,
 * leaving its pinned count unchanged. (The test JVM itself may be root with CAP_IPC_LOCK, which the kernel exempts
 * from the limit, hence the child.)
 */
final class RlimitMemlockTest
{
    /** What the MR engine asks for local memory. */
    private static final int LOCAL_ACCESS = Access.LOCAL | Access.RELAXED_ORDERING;

    private static final long CAP_IPC_LOCK_BIT = 1L << 14;

    @Test
    void pastRlimitMemlockRegistrationFailsWithEnomemNamingTheLimit() throws Exception
    {
        final List<String> command = new ArrayList<>();
        if (0 == Posix.getuid() || hasIpcLock())
        {
            command.addAll(List.of(Equipment.systemProgram("setpriv").toString(), "--inh-caps=-ipc_lock",
                "--bounding-set=-ipc_lock"));
        }
        command.addAll(List.of("/bin/sh", "-c", "ulimit -S -l 1024 && exec \"$@\"", "sh"));
        command.add(ProcessHandle.current().info().command().orElse(
            Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(Arrays.stream(System.getProperty("mrd.jvm.flags", "--enable-native-access=ALL-UNNAMED")
            .trim().split("\\s+")).filter(s -> !s.isEmpty()).toList());
        command.addAll(List.of("-Xmx128m", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"),
            Child.class.getName()));

        final Path output = Files.createTempFile("mrd-rlimit-child-", ".out");
        try
        {
            final Process child = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(output.toFile()).start();
            if (!child.waitFor(120, TimeUnit.SECONDS))
            {
                child.destroyForcibly();
            }
            final String printed = Files.readString(output, StandardCharsets.UTF_8);
            assertEquals(0, child.exitValue(), printed);
            assertTrue(printed.contains("within the limit: pinned=512KiB"), printed);
            assertTrue(printed.contains("ENOMEM: mlock of 4MiB at 0x"), printed);
            assertTrue(printed.contains("failed: ENOMEM: Cannot allocate memory; mrd has 512KiB pinned and " +
                "RLIMIT_MEMLOCK is 1MiB: raise it (ulimit -l"), printed);
            assertTrue(printed.contains("after the failure: pinned=512KiB"), printed);
        }
        finally
        {
            Files.deleteIfExists(output);
        }
    }

    private static boolean hasIpcLock() throws IOException
    {
        for (final String line : Files.readAllLines(Path.of("/proc/self/status")))
        {
            if (line.startsWith("CapEff:"))
            {
                return 0 != (Long.parseUnsignedLong(line.substring(7).trim(), 16) & CAP_IPC_LOCK_BIT);
            }
        }
        return false;
    }

    /**
     * Runs in the child: 512 KiB within the limit, then 4 MiB past it.
     */
    public static final class Child
    {
        public static void main(final String[] args)
        {
            final MemorySegment memory = Posix.map(8 * MIB, Posix.PROT_READ | Posix.PROT_WRITE,
                Posix.MAP_PRIVATE | Posix.MAP_ANONYMOUS, -1, 0);
            try (SoftRegistrar soft = new SoftRegistrar())
            {
                soft.register(memory.address(), 512 * KIB, LOCAL_ACCESS);
                System.out.println("within the limit: pinned=" + Sizes.format(soft.pinnedBytes()));
                try
                {
                    soft.register(memory.address() + MIB, 4 * MIB, LOCAL_ACCESS);
                    System.out.println("registered past the limit");
                }
                catch (final MrdException ex)
                {
                    System.out.println(ex.oneLine());
                }
                System.out.println("after the failure: pinned=" + Sizes.format(soft.pinnedBytes()));
            }
        }
    }
}
