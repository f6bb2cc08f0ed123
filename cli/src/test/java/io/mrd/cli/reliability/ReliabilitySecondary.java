package io.mrd.cli.reliability;

import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.DaemonDeadException;
import io.mrd.secondary.ExternalMemory;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The secondary processes of the crash and security tests, one mode each (the test reads the lines they
 * print, and sends commands through {@link Signals}):
 * <ul>
 *   <li>{@code steady DIR NAME SIGNALS}: a survivor. Holds two allocations, allocates and frees transient
 *       memory, looks up buffers, verifies every lkey against the control file; on "quiesce N" it frees its
 *       transient memory and says what it holds, on "resume N" it goes on, on "exit" it frees all and exits 0
 *       when no lkey was wrong and no call failed.</li>
 *   <li>{@code churn DIR NAME THREADS}: the victim. Every thread loops ALLOC + CREATE_MR (+ FREE, sometimes
 *       REG_EXTERNAL/DEREG_EXTERNAL), so requests are in flight nearly all the time; runs until killed.</li>
 *   <li>{@code watch DIR NAME SIGNALS reattach|stay}: looks up lkeys in a tight loop until the daemon is
 *       found dead, says when, checks that every later lookup throws, then (reattach) attaches to the new
 *       daemon and verifies an lkey of the new epoch.</li>
 *   <li>{@code hold DIR NAME SIGNALS}: allocates, registers external memory, creates MRs, then waits for
 *       "exit" or the daemon's end, and says which.</li>
 *   <li>{@code scribble DIR NAME}: attaches and writes into the control file, which must fault.</li>
 *   <li>{@code recycle DIR NAME THREADS SECONDS}: every thread allocates one segment, writes it, looks it up
 *       and frees it, as fast as it can; another thread of the same client is then often given the address
 *       just freed. Exits 0 when every call succeeded.</li>
 * </ul>
 */
public final class ReliabilitySecondary
{
    static final long SEGMENT = 2 * Sizes.MIB;
    /** No mode runs longer than this, whatever happens to the test that started it. */
    static final long MAX_RUN_NS = TimeUnit.MINUTES.toNanos(10);
    private static final int ERRORS_PRINTED = 10;

    private ReliabilitySecondary()
    {
    }

    public static void main(final String[] args)
    {
        int code;
        try
        {
            final Path dir = Path.of(args[1]);
            final String name = args[2];
            code = switch (args[0])
            {
                case "steady" -> steady(dir, name, Path.of(args[3]));
                case "churn" -> churn(dir, name, Integer.parseInt(args[3]));
                case "watch" -> watch(dir, name, Path.of(args[3]), "reattach".equals(args[4]));
                case "hold" -> hold(dir, name, Path.of(args[3]));
                case "scribble" -> scribble(dir, name);
                case "recycle" -> recycle(dir, name, Integer.parseInt(args[3]), Long.parseLong(args[4]));
                default -> throw new IllegalArgumentException("unknown mode " + args[0]);
            };
        }
        catch (final Throwable ex)
        {
            say("failed: " + ex);
            ex.printStackTrace(System.out);
            code = 3;
        }
        System.out.flush();
        System.exit(code);
    }

    static void say(final String line)
    {
        synchronized (System.out)
        {
            System.out.println(line);
            System.out.flush();
        }
    }

    private static MrdClient attach(final Path dir, final String name)
    {
        return MrdClient.attach(new ClientContext().dir(dir).name(name));
    }

    /** Writes a word into every segment, so a mapping that is not there faults here and now. */
    static void touch(final MemorySegment segment)
    {
        for (long at = 0; at < segment.byteSize(); at += SEGMENT)
        {
            segment.set(JAVA_LONG, at, segment.address() + at);
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    /**
     * Looks up random buffers (each inside one 2 MiB segment, so never legitimately straddling two MRs) and
     * verifies every lkey.
     */
    static final class Checker
    {
        final MrCache cache;
        final LkeyVerifier verifier;
        final SplittableRandom random;
        long ok;
        long errors;

        Checker(final MrdClient client, final SplittableRandom random)
        {
            this.cache = client.newCache();
            this.verifier = new LkeyVerifier(client.controlFile());
            this.random = random;
        }

        void lookup(final long base, final long length)
        {
            final long segments = length / SEGMENT;
            final long offset = random.nextLong(SEGMENT - 64) & ~63L;
            final long address = base + random.nextLong(segments) * SEGMENT + offset;
            final long bytes = 1 + random.nextLong(Math.min(64 * Sizes.KIB, SEGMENT - offset));
            try
            {
                final int lkey = cache.lkey(address, bytes);
                final String wrong = verifier.check(address, bytes, lkey);
                if (null == wrong)
                {
                    ok++;
                }
                else
                {
                    error("WRONG " + wrong);
                }
            }
            catch (final MrdException ex)
            {
                error("lookup of [" + Sizes.hex(address) + ", +" + bytes + ") failed: " + ex.oneLine());
            }
        }

        void error(final String what)
        {
            if (errors++ < ERRORS_PRINTED)
            {
                say("error " + what);
            }
        }
    }

    static long bytes(final List<MemorySegment> segments)
    {
        return segments.stream().mapToLong(MemorySegment::byteSize).sum();
    }

    static int steady(final Path dir, final String name, final Path signals)
    {
        final Signals commands = new Signals(signals, name);
        try (MrdClient client = attach(dir, name))
        {
            final Checker checker = new Checker(client, new SplittableRandom(name.hashCode()));
            final SplittableRandom random = checker.random;
            final List<MemorySegment> fixed = List.of(client.allocate(SEGMENT), client.allocate(2 * SEGMENT));
            fixed.forEach(ReliabilitySecondary::touch);
            final ArrayDeque<MemorySegment> transients = new ArrayDeque<>();
            boolean quiesced = false;
            long lastReport = 0;
            say("ready holding=" + bytes(fixed));
            final long start = System.nanoTime();
            while (System.nanoTime() - start < MAX_RUN_NS)
            {
                final String command = commands.poll();
                if (null != command)
                {
                    if (command.startsWith("quiesce"))
                    {
                        while (!transients.isEmpty())
                        {
                            client.free(transients.poll());
                        }
                        quiesced = true;
                        say("ack " + command + " holding=" + bytes(fixed) + " ok=" + checker.ok + " errors=" +
                            checker.errors);
                    }
                    else if (command.startsWith("resume"))
                    {
                        quiesced = false;
                        say("ack " + command + " ok=" + checker.ok + " errors=" + checker.errors);
                    }
                    else if (command.equals("exit"))
                    {
                        transients.forEach(client::free);
                        fixed.forEach(client::free);
                        say("exit ok=" + checker.ok + " errors=" + checker.errors);
                        return checker.errors == 0 ? 0 : 1;
                    }
                }
                for (int i = 0; i < 8; i++)
                {
                    final MemorySegment segment = fixed.get(random.nextInt(fixed.size()));
                    checker.lookup(segment.address(), segment.byteSize());
                }
                if (!quiesced)
                {
                    try
                    {
                        final int dice = random.nextInt(4);
                        if (dice == 0 && transients.size() < 3)
                        {
                            final MemorySegment segment = client.allocate((1 + random.nextInt(2)) * SEGMENT);
                            touch(segment);
                            transients.add(segment);
                        }
                        else if (dice == 1 && !transients.isEmpty())
                        {
                            client.free(transients.poll());
                        }
                    }
                    catch (final MrdException ex)
                    {
                        checker.error("alloc/free failed: " + ex.oneLine());
                    }
                    for (final MemorySegment segment : transients)
                    {
                        checker.lookup(segment.address(), segment.byteSize());
                    }
                }
                if (System.nanoTime() - lastReport > TimeUnit.MILLISECONDS.toNanos(250))
                {
                    lastReport = System.nanoTime();
                    say("progress ok=" + checker.ok + " errors=" + checker.errors);
                }
                // pacing, not synchronisation: leave the two cores to the daemon and the victims
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
            say("timeout ok=" + checker.ok + " errors=" + checker.errors);
            return 2;
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    static int churn(final Path dir, final String name, final int threads)
    {
        final MrdClient client = attach(dir, name);
        final AtomicLong ops = new AtomicLong();
        final AtomicLong failures = new AtomicLong();
        final AtomicLong busyNs = new AtomicLong();
        final long start = System.nanoTime();
        for (int t = 0; t < threads; t++)
        {
            final SplittableRandom random = new SplittableRandom(System.nanoTime() + t);
            final Thread thread = new Thread(() ->
            {
                final MrCache cache = client.newCache();
                final ArrayDeque<MemorySegment> held = new ArrayDeque<>();
                while (System.nanoTime() - start < MAX_RUN_NS)
                {
                    final long before = System.nanoTime();
                    try
                    {
                        final MemorySegment segment = client.allocate((1 + random.nextInt(3)) * SEGMENT);
                        held.add(segment);
                        cache.lkey(segment.address(), 64);
                        cache.lkey(segment.address() + segment.byteSize() - 64, 64);
                        if (held.size() > 4)
                        {
                            client.free(held.poll());
                        }
                        if (random.nextInt(8) == 0)
                        {
                            final ExternalMemory external = client.registerExternal(SEGMENT);
                            cache.lkey(external.address(), 64);
                            client.deregisterExternal(external);
                        }
                        ops.incrementAndGet();
                    }
                    catch (final MrdException ex)
                    {
                        if (failures.getAndIncrement() < ERRORS_PRINTED)
                        {
                            say("churn error: " + ex.oneLine());
                        }
                    }
                    busyNs.addAndGet(System.nanoTime() - before);
                }
            }, "churn-" + t);
            thread.setDaemon(true);
            thread.start();
        }
        say("ready");
        while (System.nanoTime() - start < MAX_RUN_NS)
        {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(200));
            final long elapsed = System.nanoTime() - start;
            say("churning ops=" + ops.get() + " failures=" + failures.get() + " busy=" +
                String.format("%.3f", busyNs.get() / (double)(elapsed * threads)));
        }
        return 2;
    }

    // ---------------------------------------------------------------------------------------------------------

    static int watch(final Path dir, final String name, final Path signals, final boolean reattach)
    {
        final Signals commands = new Signals(signals, name);
        final long oldEpoch;
        final SplittableRandom random = new SplittableRandom(name.hashCode());
        try (MrdClient client = attach(dir, name))
        {
            oldEpoch = client.epoch();
            final List<MemorySegment> memory = List.of(client.allocate(SEGMENT), client.allocate(2 * SEGMENT));
            memory.forEach(ReliabilitySecondary::touch);
            final MrCache cache = client.newCache();
            final LkeyVerifier verifier = new LkeyVerifier(client.controlFile());
            final long[] addresses = new long[16];
            for (int i = 0; i < addresses.length; i++)
            {
                final MemorySegment segment = memory.get(i % memory.size());
                addresses[i] = segment.address() + random.nextLong(segment.byteSize() - 64);
                final int lkey = cache.lkey(addresses[i], 64);
                final String wrong = verifier.check(addresses[i], 64, lkey);
                if (null != wrong)
                {
                    say("WRONG " + wrong);
                    return 1;
                }
            }
            say("watching epoch=" + Sizes.hex(oldEpoch));
            long lastLkeyMs = 0;
            long lookups = 0;
            DaemonDeadException dead = null;
            final long start = System.nanoTime();
            while (null == dead && System.nanoTime() - start < MAX_RUN_NS)
            {
                try
                {
                    for (int i = 0; i < 1024; i++)
                    {
                        cache.lkey(addresses[i & (addresses.length - 1)], 64);
                        lookups++;
                    }
                    lastLkeyMs = System.currentTimeMillis();
                }
                catch (final DaemonDeadException ex)
                {
                    dead = ex;
                }
            }
            final long detectedMs = System.currentTimeMillis();
            if (null == dead)
            {
                say("no death seen after " + lookups + " lookups");
                return 2;
            }
            say("dead detected=" + detectedMs + " lastLkey=" + lastLkeyMs + " lookups=" + lookups + " reason=" +
                dead.getMessage());

            // From now on nothing may come back but DaemonDeadException: cached entries, new addresses, requests.
            long returned = 0;
            long refused = 0;
            long other = 0;
            MrCache fresh = null;
            try
            {
                fresh = client.newCache();
                returned++;
            }
            catch (final DaemonDeadException ex)
            {
                refused++;
            }
            for (int i = 0; i < 10_000; i++)
            {
                final MrCache which = (i & 1) == 0 || null == fresh ? cache : fresh;
                final long address = (i & 2) == 0 ? addresses[i & (addresses.length - 1)] :
                    memory.get(0).address() + random.nextLong(SEGMENT - 64);
                try
                {
                    which.lkey(address, 64);
                    returned++;
                }
                catch (final DaemonDeadException ex)
                {
                    refused++;
                }
                catch (final MrdException ex)
                {
                    other++;
                }
            }
            try
            {
                client.allocate(SEGMENT);
                returned++;
            }
            catch (final DaemonDeadException ex)
            {
                refused++;
            }
            say("after-death returned=" + returned + " refused=" + refused + " other=" + other);
        }
        if (!reattach)
        {
            return awaitExit(commands, null);
        }

        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        int attempts = 0;
        while (System.nanoTime() < deadline)
        {
            attempts++;
            final MrdClient client;
            try
            {
                client = attach(dir, name);
            }
            catch (final MrdException ex)
            {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
                continue;
            }
            try
            {
                if (client.epoch() == oldEpoch)
                {
                    say("WRONG attached to the old epoch " + Sizes.hex(oldEpoch) + " again");
                    return 1;
                }
                final MemorySegment segment = client.allocate(SEGMENT);
                touch(segment);
                final int lkey = client.newCache().lkey(segment.address() + 128, 64);
                final String wrong = new LkeyVerifier(client.controlFile()).check(segment.address() + 128, 64, lkey);
                say("reattached epoch=" + Sizes.hex(client.epoch()) + " old=" + Sizes.hex(oldEpoch) + " attempts=" +
                    attempts + " lkey=" + LkeyVerifier.hexKey(lkey) + (null == wrong ? " verified" : " WRONG " + wrong));
                if (null != wrong)
                {
                    return 1;
                }
                return awaitExit(commands, client);
            }
            finally
            {
                client.close();
            }
        }
        say("could not reattach within 120 s (" + attempts + " attempts)");
        return 2;
    }

    private static int awaitExit(final Signals commands, final MrdClient client)
    {
        final long start = System.nanoTime();
        while (System.nanoTime() - start < MAX_RUN_NS)
        {
            if ("exit".equals(commands.poll()))
            {
                say("exit");
                return 0;
            }
            if (null != client && client.isBroken())
            {
                say("daemon gone while waiting for exit");
                return 1;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
        }
        return 2;
    }

    // ---------------------------------------------------------------------------------------------------------

    static int hold(final Path dir, final String name, final Path signals)
    {
        final Signals commands = new Signals(signals, name);
        try (MrdClient client = attach(dir, name))
        {
            final List<MemorySegment> memory = new ArrayList<>();
            final List<ExternalMemory> externals = new ArrayList<>();
            final MrCache cache = client.newCache();
            final LkeyVerifier verifier = new LkeyVerifier(client.controlFile());
            for (int i = 1; i <= 3; i++)
            {
                final MemorySegment segment = client.allocate(i * SEGMENT);
                touch(segment);
                memory.add(segment);
            }
            for (int i = 0; i < 2; i++)
            {
                final ExternalMemory external = client.registerExternal(SEGMENT);
                external.segment().set(JAVA_LONG, 0, external.address());
                externals.add(external);
            }
            int mrs = 0;
            for (final MemorySegment segment : memory)
            {
                final int lkey = cache.lkey(segment.address(), 64);
                final String wrong = verifier.check(segment.address(), 64, lkey);
                if (null != wrong)
                {
                    say("WRONG " + wrong);
                    return 1;
                }
                mrs++;
            }
            for (final ExternalMemory external : externals)
            {
                final int lkey = cache.lkey(external.address() + 64, 64);
                if (lkey != external.lkey() || null != verifier.check(external.address() + 64, 64, lkey))
                {
                    say("WRONG external lkey " + LkeyVerifier.hexKey(lkey) + " for " + external);
                    return 1;
                }
                mrs++;
            }
            say("holding lookups=" + mrs + " bytes=" + bytes(memory) + " externals=" + externals.size());
            final long start = System.nanoTime();
            while (System.nanoTime() - start < MAX_RUN_NS)
            {
                try
                {
                    cache.lkey(memory.getFirst().address(), 64);
                }
                catch (final DaemonDeadException ex)
                {
                    say("daemon gone: " + ex.getMessage());
                    return 0;
                }
                if ("exit".equals(commands.poll()))
                {
                    memory.forEach(client::free);
                    externals.forEach(client::deregisterExternal);
                    say("exit");
                    return 0;
                }
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
            }
            return 2;
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    static int recycle(final Path dir, final String name, final int threads, final long seconds)
        throws InterruptedException
    {
        final AtomicLong cycles = new AtomicLong();
        final AtomicLong failures = new AtomicLong();
        final long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        try (MrdClient client = attach(dir, name))
        {
            final Thread[] running = new Thread[threads];
            for (int t = 0; t < threads; t++)
            {
                running[t] = new Thread(() ->
                {
                    final MrCache cache = client.newCache();
                    while (System.nanoTime() < end)
                    {
                        try
                        {
                            final MemorySegment segment = client.allocate(SEGMENT);
                            touch(segment);
                            cache.lkey(segment.address(), 64);
                            client.free(segment);
                            cycles.incrementAndGet();
                        }
                        catch (final MrdException ex)
                        {
                            if (failures.getAndIncrement() < ERRORS_PRINTED)
                            {
                                say("recycle error: " + ex.oneLine());
                            }
                        }
                    }
                }, "recycle-" + t);
                running[t].start();
            }
            for (final Thread thread : running)
            {
                thread.join();
            }
        }
        say("recycled cycles=" + cycles.get() + " failures=" + failures.get());
        return failures.get() == 0 ? 0 : 1;
    }

    // ---------------------------------------------------------------------------------------------------------

    static int scribble(final Path dir, final String name)
    {
        try (MrdClient client = attach(dir, name))
        {
            final long address = client.controlFile().buffer().addressOffset();
            say("attached ctl=" + Sizes.hex(address) + " epoch=" + Sizes.hex(client.epoch()));
            // The control file is mapped read-only: this store must fault (SIGSEGV) and end this process.
            MemorySegment.ofAddress(address).reinterpret(HeaderDescriptor.EPOCH_OFFSET + Long.BYTES)
                .set(JAVA_LONG, HeaderDescriptor.EPOCH_OFFSET, 0x5C81BB1EL);
            say("WROTE into the control file");
            return 1;
        }
    }
}
