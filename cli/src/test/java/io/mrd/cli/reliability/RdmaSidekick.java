package io.mrd.cli.reliability;

import io.mrd.layout.Access;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.KeyPair;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.verbs.CompletionQueue;
import io.mrd.secondary.verbs.Opcode;
import io.mrd.secondary.verbs.QpCaps;
import io.mrd.secondary.verbs.QueuePair;
import io.mrd.secondary.verbs.SgeList;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.secondary.verbs.WorkCompletions;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The other secondaries of {@link RdmaEndToEndTest}, one mode each:
 * <ul>
 *   <li>{@code churn DIR NAME SIGNALS}: allocates memory of 2 to 8 MiB, local or remote, looks up keys in it
 *       (CREATE_MR), holds up to four allocations and frees the oldest: memory free events and devGen bumps
 *       while the peers move data. Exits 0 on "exit", printing {@code churned ops=..}.</li>
 *   <li>{@code victim DIR NAME}: a loopback pair of queue pairs of its own moving data with RDMA WRITE and READ,
 *       eight work requests in flight at all times, until it is killed; prints {@code victim running ops=..}.</li>
 * </ul>
 */
public final class RdmaSidekick
{
    private static final long SEGMENT = 2L << 20;

    private RdmaSidekick()
    {
    }

    public static void main(final String[] args)
    {
        final Path dir = Path.of(args[1]);
        final String name = args[2];
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).name(name)))
        {
            switch (args[0])
            {
                case "churn" -> churn(client, new Signals(Path.of(args[3]), name));
                case "victim" -> victim(client);
                default -> throw new IllegalArgumentException("unknown mode " + args[0]);
            }
        }
        System.exit(0);
    }

    private static void churn(final MrdClient client, final Signals signals)
    {
        final SplittableRandom random = new SplittableRandom(System.nanoTime());
        final MrCache cache = client.newCache();
        final ArrayDeque<MemorySegment> held = new ArrayDeque<>();
        long ops = 0;
        long next = System.nanoTime();
        System.out.println("churning");
        while (!"exit".equals(signals.poll()))
        {
            final long size = (1 + random.nextInt(4)) * SEGMENT;
            final int access = random.nextBoolean() ? Access.LOCAL : Access.REMOTE_WRITE | Access.REMOTE_READ;
            final MemorySegment memory = client.allocate(size, access);
            memory.set(JAVA_LONG, 0, ops);
            final long offset = 8L * random.nextInt((int)(size / 8 - 512));
            cache.keyPair(memory.address() + offset, 4096);
            held.add(memory);
            if (held.size() > 4)
            {
                client.free(held.poll());
            }
            ops++;
            if (System.nanoTime() - next > 0)
            {
                System.out.println("progress ops=" + ops);
                next = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(2));
        }
        held.forEach(client::free);
        System.out.println("churned ops=" + ops);
    }

    private static void victim(final MrdClient client)
    {
        final MrCache cache = client.newCache();
        final MemorySegment memory = client.allocate(SEGMENT, Access.REMOTE_WRITE | Access.REMOTE_READ);
        final Verbs verbs = client.verbs();
        final CompletionQueue cq = verbs.createCq(64);
        final QueuePair a = verbs.createRcQp(cq, cq, QpCaps.of(16, 1));
        final QueuePair b = verbs.createRcQp(cq, cq, QpCaps.of(16, 1));
        a.connect(b.qpNum());
        b.connect(a.qpNum());
        final long half = SEGMENT / 2;
        final long keys = cache.keyPair(memory);
        final SgeList sges = new SgeList(1).add(memory.address(), 64 << 10, KeyPair.lkey(keys));
        final WorkCompletions completions = new WorkCompletions(16);
        long ops = 0;
        int inFlight = 0;
        long next = 0;
        while (true)
        {
            while (inFlight < 8)
            {
                a.postSend(ops + inFlight, inFlight % 2 == 0 ? Opcode.RDMA_WRITE : Opcode.RDMA_READ, sges,
                    memory.address() + half, KeyPair.rkey(keys), true);
                inFlight++;
            }
            final int n = cq.poll(completions);
            for (int i = 0; i < n; i++)
            {
                if (completions.status(i) != WorkCompletions.SUCCESS)
                {
                    throw new IllegalStateException("victim: " + completions.statusNameOf(i));
                }
            }
            inFlight -= n;
            ops += n;
            if (ops >= next)
            {
                System.out.println("victim running ops=" + ops);
                next = ops + 2000;
            }
            if (n == 0)
            {
                LockSupport.parkNanos(20_000);
            }
        }
    }
}
