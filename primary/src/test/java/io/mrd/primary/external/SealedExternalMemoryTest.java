package io.mrd.primary.external;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.MrdDaemon;
import io.mrd.primary.TestContexts;
import io.mrd.testing.BaseAddresses;
import io.mrd.testing.Wait;
import io.mrd.testing.Equipment;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.Invariants;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.mrd.primary.DaemonSettings.MAX_EXTERNAL;
import static io.mrd.primary.DaemonSettings.REGISTRATION_LATENCY;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * REG_EXTERNAL's file is sealed against resizing before it is checked and pinned ({@link ExternalFile}), and
 * every file that cannot be sealed so is refused with how to make one that can: a file shrunk before the
 * registration, truncated while it is being pinned and after it, unsealed but sealable, unsealable, sealed
 * with F_SEAL_SEAL only, already sealed, sealed against writes, read-only, not a memfd, and hugetlbfs memory the
 * system cannot supply. After each: the right error, the engine's invariants as {@code mrd check} reads them,
 * and nothing left pinned (the counter and the kernel's VmLck).
 * <p>
 * The daemon runs in this JVM for its engine (control file, soft provider, counters); the test drives an
 * {@link ExternalRegistrations} of its own over that engine with the fd the sender would pass (reopened through
 * /proc, since {@code register} closes what it is given). The path through the socket with SCM_RIGHTS is the
 * server's ExternalRegistrationTest's and, between processes, cli's SecurityTest's.
 */
class SealedExternalMemoryTest
{
    /** Clear of every other primary test's bases (memory 0+, EngineFixture 40+, ServerFixture 60+ TiB). */
    private static final long BASE = BaseAddresses.next();
    private static final long WINDOW = BaseAddresses.next();
    private static final long WINDOW_LENGTH = 64 * Sizes.MIB;
    private static final long LENGTH = 4 * Sizes.MIB;
    private static final int OWNER = 7;
    private static final Duration WAIT = Duration.ofSeconds(30);

    @TempDir
    Path dir;

    private MrdDaemon daemon;
    private ExternalRegistrations external;
    private long lockedBefore;
    private final List<Integer> fds = new ArrayList<>();

    @BeforeEach
    void start()
    {
        start(0);
    }

    private void start(final long registrationLatencyMicros)
    {
        daemon = MrdDaemon.launch(TestContexts.small(dir, BASE).set(MAX_EXTERNAL, 0L)
            .set(REGISTRATION_LATENCY, registrationLatencyMicros));
        external = new ExternalRegistrations(WINDOW, WINDOW_LENGTH, daemon.engine());
        lockedBefore = lockedKib();
    }

    @AfterEach
    void stop()
    {
        try
        {
            if (null != external)
            {
                try
                {
                    for (final long address : daemon.engine().externalsOwnedBy(OWNER))
                    {
                        external.deregister(address, OWNER);
                    }
                }
                finally
                {
                    // the window's reservation goes even when a failed test left the engine inconsistent
                    external.close();
                    external = null;
                }
            }
        }
        finally
        {
            if (null != daemon)
            {
                daemon.close();
                daemon = null;
            }
            fds.forEach(Posix::close);
            fds.clear();
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    @Test
    void anUnsealedSealableFileIsSealedAcceptedAndCanNoLongerBeResized()
    {
        final int memfd = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING, LENGTH);
        final MemorySegment local = Posix.map(LENGTH, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, memfd, 0);
        try
        {
            local.set(ValueLayout.JAVA_LONG, LENGTH - 8, 0x5EA1EDL);
            assertEquals(0, Posix.getSeals(memfd), "unsealed before");

            final MrEntry mr = register(memfd, LENGTH);
            assertEquals(ExternalFile.SEALS, Posix.getSeals(memfd) & ExternalFile.SEALS, "the daemon sealed it");
            assertClean(LENGTH, "registered");
            assertEquals(0x5EA1EDL, MemorySegment.ofAddress(mr.start).reinterpret(LENGTH).get(ValueLayout.JAVA_LONG,
                LENGTH - 8), "the daemon maps the sender's file");

            // After the registration, the sender can neither shrink nor grow the file: the lkey stays backed.
            assertErrno(ErrorCode.EPERM, () -> Posix.ftruncate(memfd, 0), "shrink to 0 after registering");
            assertErrno(ErrorCode.EPERM, () -> Posix.ftruncate(memfd, 4096), "shrink to 4 KiB after registering");
            assertErrno(ErrorCode.EPERM, () -> Posix.ftruncate(memfd, 2 * LENGTH), "grow after registering");
            assertEquals(LENGTH, size(memfd));
            assertEquals(0x5EA1EDL, local.get(ValueLayout.JAVA_LONG, LENGTH - 8));

            external.deregister(mr.start, OWNER);
            assertClean(0, "deregistered");
            // the seal outlives the registration: seals cannot be removed
            assertErrno(ErrorCode.EPERM, () -> Posix.ftruncate(memfd, 0), "shrink after deregistering");
        }
        finally
        {
            Posix.munmap(local.address(), LENGTH);
        }
    }

    @Test
    void aFileShrunkBeforeTheRegistrationIsRefusedWithItsSizeAndLeftUnsealed()
    {
        final int memfd = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING, LENGTH);
        Posix.ftruncate(memfd, 4096);
        final MrdException refused = refuse(ErrorCode.EINVAL, memfd, LENGTH, "has 4096 bytes, fewer than the " +
            LENGTH, "ftruncate");
        assertTrue(refused.getMessage().contains("memfd:sealed-test"), refused::getMessage);
        assertEquals(0, Posix.getSeals(memfd), "a file refused for its size is not sealed: its owner may resize it");

        Posix.ftruncate(memfd, LENGTH);
        final MrEntry mr = register(memfd, LENGTH);
        assertClean(LENGTH, "registered once sized");
        external.deregister(mr.start, OWNER);
        assertClean(0, "deregistered");
    }

    /**
     * The window between the size check and the pinning: the registration is held in the provider (latency),
     * past every check and mapped, and the sender truncates then. The seal came first, so the truncation fails
     * and the registration pins the whole file.
     */
    @Test
    void aTruncationBetweenTheCheckAndThePinningFailsBecauseTheSealCameFirst() throws Exception
    {
        stop();
        start(TimeUnit.SECONDS.toMicros(2));
        final int memfd = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING, LENGTH);
        final int passed = reopen(memfd, Posix.O_RDWR);
        final CompletableFuture<MrEntry> registration =
            CompletableFuture.supplyAsync(() -> external.register(LENGTH, passed, OWNER, Access.LOCAL));
        Wait.await("the registration past its checks, mapped and waiting in the provider", WAIT, () ->
            external.bytesInUse() > 0 || registration.isDone());
        assertFalse(registration.isDone(), "the registration is still before its pinning");
        assertEquals(0, daemon.counters().get(MrdCounter.BYTES_PINNED).get(), "nothing pinned yet");

        assertErrno(ErrorCode.EPERM, () -> Posix.ftruncate(memfd, 0), "truncation between the check and the pin");
        assertFalse(registration.isDone(), "the truncation came before the pinning");
        final MrEntry mr = registration.get(30, TimeUnit.SECONDS);
        assertEquals(LENGTH, mr.end - mr.start);
        assertEquals(LENGTH, size(memfd));
        assertClean(LENGTH, "registered");
        external.deregister(mr.start, OWNER);
        assertClean(0, "deregistered");
    }

    @Test
    void aMemfdCreatedWithoutAllowSealingIsRefusedWithHowToCreateOne()
    {
        final int memfd = memfd(Posix.MFD_CLOEXEC, LENGTH);
        refuse(ErrorCode.EINVAL, memfd, LENGTH, "has the seals F_SEAL_SEAL:", "not both F_SEAL_SHRINK and F_SEAL_GROW",
            "without MFD_ALLOW_SEALING", "memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)",
            "MrdClient.registerExternal(length)");
        // and the sender can still truncate it, which is why it is refused
        Posix.ftruncate(memfd, 0);
    }

    @Test
    void aFileSealedWithSealSealButNotBothSealsIsRefused()
    {
        final int memfd = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING, LENGTH);
        assertEquals(0, Posix.addSeals(memfd, Posix.F_SEAL_SEAL | Posix.F_SEAL_SHRINK));
        refuse(ErrorCode.EINVAL, memfd, LENGTH, "F_SEAL_SEAL | F_SEAL_SHRINK", "MFD_ALLOW_SEALING");
    }

    @Test
    void aFileAlreadySealedAgainstResizingIsAcceptedAsItIs()
    {
        final int memfd = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING, LENGTH);
        final int seals = Posix.F_SEAL_SEAL | Posix.F_SEAL_SHRINK | Posix.F_SEAL_GROW;
        assertEquals(0, Posix.addSeals(memfd, seals));
        final MrEntry mr = register(memfd, LENGTH);
        assertEquals(seals, Posix.getSeals(memfd));
        assertClean(LENGTH, "registered");
        external.deregister(mr.start, OWNER);

        // sealed against shrinking only, still sealable: the daemon adds F_SEAL_GROW
        final int shrinkOnly = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING, LENGTH);
        assertEquals(0, Posix.addSeals(shrinkOnly, Posix.F_SEAL_SHRINK));
        external.deregister(register(shrinkOnly, LENGTH).start, OWNER);
        assertEquals(ExternalFile.SEALS, Posix.getSeals(shrinkOnly));
        assertClean(0, "deregistered");
    }

    @Test
    void filesThatCannotServeAsRegisteredMemoryAreRefused() throws IOException
    {
        final int writeSealed = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING, LENGTH);
        assertEquals(0, Posix.addSeals(writeSealed, Posix.F_SEAL_WRITE));
        refuse(ErrorCode.EINVAL, writeSealed, LENGTH, "sealed against writing", "F_SEAL_WRITE");

        final int readOnly = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING, LENGTH);
        assertRefused(ErrorCode.EINVAL, reopen(readOnly, Posix.O_RDONLY), LENGTH, "read-only", "O_RDWR");
        assertEquals(0, Posix.getSeals(readOnly));

        // A regular file (the build directory's file system: sealing unsupported, or F_SEAL_SEAL on tmpfs)
        final Path file = Files.createTempFile(Path.of("target"), "not-a-memfd", ".bin");
        try
        {
            final int fd = Posix.open(file.toString(), Posix.O_RDWR | Posix.O_CLOEXEC, 0);
            fds.add(fd);
            Posix.ftruncate(fd, LENGTH);
            final MrdException refused = assertRefused(ErrorCode.EINVAL, reopen(fd, Posix.O_RDWR), LENGTH,
                file.getFileName().toString(), "MFD_ALLOW_SEALING");
            assertTrue(refused.getMessage().contains("cannot be sealed") ||
                refused.getMessage().contains("F_SEAL_SEAL"), refused::getMessage);
        }
        finally
        {
            Files.deleteIfExists(file);
        }
    }

    /**
     * Hugepage memory the pool cannot supply is refused for that, before anything is mapped or pinned, and not
     * as an mmap ENOMEM or a pinning failure blamed on RLIMIT_MEMLOCK; memory it can supply seals and registers.
     */
    @Test
    void hugepageMemoryIsSealableAndAShortPoolIsNamedAsSuch() throws IOException
    {
        final int memfd;
        try
        {
            memfd = memfd(Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING | Posix.MFD_HUGETLB, LENGTH);
        }
        catch (final MrdException ex)
        {
            Equipment.unavailable("no hugetlbfs memfd here: " + ex.getMessage() + "; run 'scripts/setup-hugepages 64' " +
                "as root", Equipment.hugePagesRequired(), Equipment.REQUIRE_HUGEPAGES_ENV + "=1");
            return;
        }
        if (freeHugepageBytes() >= LENGTH)
        {
            final MrEntry mr = register(memfd, LENGTH);
            assertEquals(ExternalFile.SEALS, Posix.getSeals(memfd) & ExternalFile.SEALS);
            assertErrno(ErrorCode.EPERM, () -> Posix.ftruncate(memfd, 0), "shrinking a registered hugetlbfs memfd");
            external.deregister(mr.start, OWNER);
            assertClean(0, "deregistered");
            return;
        }
        final MrdException refused = assertRefused(null, reopen(memfd, Posix.O_RDWR), LENGTH, "fallocate",
            "HugePages_Free", "before anything is pinned");
        assertTrue(refused.code() == ErrorCode.ENOSPC || refused.code() == ErrorCode.ENOMEM, refused::oneLine);
        assertFalse(refused.getMessage().contains("RLIMIT_MEMLOCK"), refused::getMessage);
    }

    // ---------------------------------------------------------------------------------------------------------

    /**
     * @return a memfd of {@code size} bytes, closed after the test.
     */
    private int memfd(final int flags, final long size)
    {
        final int fd = Posix.memfdCreate("sealed-test", flags);
        fds.add(fd);
        Posix.ftruncate(fd, size);
        return fd;
    }

    /**
     * @return a new descriptor of the same file, as the daemon receives one (it closes it).
     */
    private static int reopen(final int fd, final int access)
    {
        return Posix.open("/proc/self/fd/" + fd, access | Posix.O_CLOEXEC, 0);
    }

    private MrEntry register(final int memfd, final long length)
    {
        return external.register(length, reopen(memfd, Posix.O_RDWR), OWNER, Access.LOCAL);
    }

    private MrdException refuse(final ErrorCode code, final int memfd, final long length, final String... mentions)
    {
        return assertRefused(code, reopen(memfd, Posix.O_RDWR), length, mentions);
    }

    /**
     * Registers {@code passed} expecting a refusal that mentions each of {@code mentions}, then checks that the
     * refusal left nothing behind.
     *
     * @param code the expected code, or null to leave it to the caller.
     */
    private MrdException assertRefused(final ErrorCode code, final int passed, final long length, final String... mentions)
    {
        final long pinned = daemon.counters().get(MrdCounter.BYTES_PINNED).get();
        final MrdException refused = assertThrows(MrdException.class, () -> external.register(length, passed, OWNER, Access.LOCAL));
        System.out.println("REFUSED " + refused.oneLine());
        if (null != code)
        {
            assertEquals(code, refused.code(), refused::oneLine);
        }
        for (final String mention : mentions)
        {
            assertTrue(refused.getMessage().contains(mention), () -> "'" + mention + "' not in: " + refused.getMessage());
        }
        assertEquals(pinned, daemon.counters().get(MrdCounter.BYTES_PINNED).get(), "the refusal pinned nothing");
        assertClean(pinned, "after the refusal");
        return refused;
    }

    /**
     * Asserts the control file's invariants and that exactly {@code pinned} bytes are pinned, by the counter and
     * by the kernel, and registered in the window.
     */
    private void assertClean(final long pinned, final String when)
    {
        assertEquals(List.of(), Invariants.check(ControlFileSnapshot.read(daemon.controlFile())), when);
        assertEquals(pinned, daemon.counters().get(MrdCounter.BYTES_PINNED).get(), "pinned bytes " + when);
        assertEquals(lockedBefore + pinned / 1024, lockedKib(), "VmLck " + when);
        assertEquals(Sizes.alignUp(pinned, ExternalWindow.GRANULE), external.bytesInUse(), "window in use " + when);
    }

    private static void assertErrno(final ErrorCode code, final Runnable call, final String what)
    {
        final MrdException ex = assertThrows(MrdException.class, call::run, what + " succeeded");
        assertEquals(code, ex.code(), () -> what + ": " + ex.oneLine());
    }

    private static long size(final int fd)
    {
        try
        {
            return Files.size(Path.of("/proc/self/fd/" + fd));
        }
        catch (final IOException ex)
        {
            throw new AssertionError(ex);
        }
    }

    private static long lockedKib()
    {
        return statusKib("VmLck:");
    }

    private static long freeHugepageBytes() throws IOException
    {
        long free = 0;
        long size = 0;
        for (final String line : Files.readAllLines(Path.of("/proc/meminfo")))
        {
            final String[] words = line.trim().split("\\s+");
            if (words[0].equals("HugePages_Free:"))
            {
                free = Long.parseLong(words[1]);
            }
            if (words[0].equals("Hugepagesize:"))
            {
                size = Long.parseLong(words[1]) * 1024;
            }
        }
        return free * size;
    }

    private static long statusKib(final String field)
    {
        try
        {
            for (final String line : Files.readAllLines(Path.of("/proc/self/status")))
            {
                if (line.startsWith(field))
                {
                    return Long.parseLong(line.substring(field.length()).trim().split("\\s+")[0]);
                }
            }
        }
        catch (final IOException ex)
        {
            throw new AssertionError(ex);
        }
        throw new AssertionError("no " + field + " in /proc/self/status");
    }
}
