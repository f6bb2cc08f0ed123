package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrEntry;
import io.mrd.primary.DaemonCounters;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * The global cache's seqlock reader ({@link GlobalCacheReader#lookup}, what every secondary runs) against the
 * daemon's real writer ({@link GlobalCacheWriter}): the writer rebuilds the cache with a new version of one
 * entry in one write section (clear, then insert: in between the cache is empty), the reader looks the
 * entry's address up twice. Every version is self-describing (its end, rkey and MR follow from its lkey), so
 * a read that mixed two versions, or saw the empty cache mid-write, shows.
 * <p>
 * One control file serves every state of a fork (creating one per state would cost more than the test):
 * jcstress runs each actor on one thread at a time, so the writer stays the only writer, as the daemon's
 * cache lock makes it.
 * <p>
 * Results per lookup: {@value #CONSISTENT} a consistent entry, {@value #TORN} fields of different versions,
 * {@value #MISSING} not found (the empty cache of a write in progress).
 */
@JCStressTest
@Description("A seqlock reader of the global cache never returns a torn or half-written entry")
@Outcome(id = "1, 1", expect = ACCEPTABLE, desc = "both lookups returned one version of the entry")
@Outcome(expect = FORBIDDEN, desc = "a lookup returned a torn entry, or missed one that is always there")
@State
public class GlobalCacheSeqLockStress
{
    static final int TORN = 0;
    static final int CONSISTENT = 1;
    static final int MISSING = 2;

    private static final long BASE = 0x7f00_0000_0000L;
    private static final long UNIT = 2L << 20;
    private static final ControlFile CONTROL_FILE;
    private static final GlobalCacheWriter WRITER;
    private static final GlobalCacheReader READER;
    private static final MrEntry WRITTEN = new MrEntry();
    private static final MrEntry READ = new MrEntry();
    private static int version;

    static
    {
        try
        {
            final Path dir = Files.createTempDirectory("mrd-stress");
            final Path path = dir.resolve(ControlFile.FILE_NAME);
            CONTROL_FILE = ControlFile.create(path, ControlFileLayout.compute(1, 16, 16, 16, 1), 4096);
            Files.delete(path);
            Files.delete(dir);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        WRITER = new GlobalCacheWriter(CONTROL_FILE, new DaemonCounters(CONTROL_FILE));
        READER = new GlobalCacheReader(CONTROL_FILE);
        WRITER.write(GlobalCacheSeqLockStress::rebuild);
    }

    /** The daemon: one rebuild, a new version of the entry. */
    @Actor
    public void writer()
    {
        WRITER.write(GlobalCacheSeqLockStress::rebuild);
    }

    /** A secondary: two lookups of the entry's address. */
    @Actor
    public void reader(final II_Result r)
    {
        r.r1 = lookup();
        r.r2 = lookup();
    }

    /** Write section: what a rebuild does (clear, insert every MR's chunks), here with one chunk. */
    private static void rebuild()
    {
        final int v = ++version;
        WRITER.clear();
        WRITER.insert(WRITTEN.set(BASE, BASE + (1 + (v & 7)) * UNIT, v, ~v, Access.LOCAL, v & 7));
    }

    private static int lookup()
    {
        final MrEntry entry = READ;
        if (!READER.lookup(BASE, entry))
        {
            return MISSING;
        }
        final int v = entry.lkey;
        return entry.start == BASE && entry.end == BASE + (1 + (v & 7)) * UNIT && entry.rkey == ~v &&
            entry.mr == (v & 7) ? CONSISTENT : TORN;
    }
}
