package io.mrd.primary.server;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.MrdCounter;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;
import io.mrd.testing.BaseAddresses;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.Invariants;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;

import static io.mrd.primary.DaemonSettings.MAX_MRS;
import static io.mrd.primary.server.ServerFixture.SEGMENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link MrdClient#allocateRegistered}: one ALLOC registers the memory, the first lookup stays in the process,
 * and the handle's keys stay valid while other clients free memory of the same chunk (the contract of
 * {@link RegisteredMemory}).
 */
class RegisterOnAllocateTest
{
    @TempDir
    Path dir;

    private ServerFixture fixture;
    private MrdClient a;
    private MrdClient b;

    @BeforeEach
    void start()
    {
        start(64);
    }

    private void start(final int maxMrs)
    {
        fixture = new ServerFixture(dir, BaseAddresses.next(), context -> context.set(MAX_MRS, maxMrs));
        a = MrdClient.attach(dir);
        b = MrdClient.attach(dir);
    }

    @AfterEach
    void stop()
    {
        b.close();
        a.close();
        fixture.close();
    }

    @Test
    void theFirstLookupOfRegisteredMemoryNeverAsksTheDaemon()
    {
        final MrCache before = a.newCache();
        final long creates = fixture.counter(MrdCounter.CREATE_REQUESTS);
        final RegisteredMemory memory = a.allocateRegistered(2 * SEGMENT, Access.LOCAL);
        assertEquals(creates + 1, fixture.counter(MrdCounter.CREATE_REQUESTS), "registered within the ALLOC");
        assertNotEquals(0, memory.lkey());
        assertEquals(Access.NO_RKEY, memory.rkey());
        assertEquals(Access.LOCAL_WRITE, memory.access());

        final MemorySegment segment = memory.segment();
        assertEquals(memory.keyPair(), before.keyPair(segment.address(), segment.byteSize()), "a cache made before");
        assertEquals(memory.lkey(), a.newCache().lkey(segment), "a cache made after");
        assertEquals(0, before.createRequests(), "no CREATE_MR from the cache made before the allocation");
        assertEquals(creates + 1, fixture.counter(MrdCounter.CREATE_REQUESTS), "nor any the daemon saw");
        a.free(memory);
        assertClean("after the free");
    }

    @Test
    void theKeysStayValidWhileAnotherClientFreesMemoryOfTheSameChunk()
    {
        final RegisteredMemory mine = a.allocateRegistered(SEGMENT, Access.LOCAL);
        final MemorySegment neighbour = b.allocate(SEGMENT);
        assertEquals(mine.segment().address() + SEGMENT, neighbour.address(), "B's memory follows A's");
        // B's first lookup registers the chunk's uncovered segment (its own) under another MR, or joins A's:
        // either way A's MR must survive B's free.
        final MrCache bCache = b.newCache();
        bCache.lkey(neighbour);
        final long devGen = a.controlFile().header().devGen();
        b.free(neighbour);
        assertNotEquals(devGen, a.controlFile().header().devGen(), "the memory free event bumped devGen");

        final MrCache fresh = a.newCache();
        assertEquals(mine.keyPair(), fresh.keyPair(mine.segment().address(), mine.segment().byteSize()),
            "a fresh lookup after B's free returns the handle's keys");
        final ControlFileSnapshot snapshot = ControlFileSnapshot.read(a.controlFile());
        assertTrue(snapshot.mrs().stream().anyMatch(mr -> mr.active() && mr.lkey() == mine.lkey() &&
            mr.start() <= mine.segment().address() && mine.segment().address() + SEGMENT <= mr.end()),
            () -> "A's MR is still ACTIVE: " + snapshot.mrs());
        assertEquals(List.of(), Invariants.check(snapshot), "invariants after B's free");
        a.free(mine);
        assertClean("after A's free");
    }

    @Test
    void aChunkSharedBeforeTheAllocationKeepsTheNewMemorysKeysAcrossFrees()
    {
        // B's memory is allocated and registered first, then A's joins the same chunk, then B's goes.
        final MemorySegment first = b.allocate(SEGMENT);
        b.newCache().lkey(first);
        final RegisteredMemory mine = a.allocateRegistered(SEGMENT, Access.LOCAL);
        final MemorySegment after = b.allocate(SEGMENT);
        b.free(first);
        b.free(after);
        final MrCache fresh = a.newCache();
        assertEquals(mine.keyPair(), fresh.keyPair(mine.segment().address(), SEGMENT));
        assertEquals(0, fresh.createRequests(), "still in the global cache, not registered again");
        assertEquals(List.of(), Invariants.check(ControlFileSnapshot.read(a.controlFile())));
        a.free(mine);
    }

    @Test
    void remoteMemoryKeepsItsMrWhileANeighbourWithTheSameAccessIsFreed()
    {
        final int access = Access.REMOTE_WRITE | Access.REMOTE_READ;
        final RegisteredMemory mine = a.allocateRegistered(SEGMENT, access);
        assertNotEquals(Access.NO_RKEY, mine.rkey());
        final MemorySegment neighbour = b.allocate(SEGMENT, access);
        b.newCache().lkey(neighbour);
        b.free(neighbour);
        final MrCache fresh = a.newCache();
        assertEquals(mine.keyPair(), fresh.keyPair(mine.segment().address(), SEGMENT));
        assertEquals(0, fresh.createRequests(), "A's MR was not detached by B's free");
        assertEquals(List.of(), Invariants.check(ControlFileSnapshot.read(a.controlFile())));
        a.free(mine);
    }

    @Test
    void aRegistrationThatFailsLeavesNothingAllocated()
    {
        stop();
        start(2);
        final MrdException unknown = assertThrows(MrdException.class, () -> a.allocateRegistered(SEGMENT, 0x4000_0000));
        assertEquals(ErrorCode.EINVAL, unknown.code(), unknown::oneLine);
        // Two MRs fill the table (different access, so different chunks); the third registration fails.
        final RegisteredMemory local = a.allocateRegistered(SEGMENT, Access.LOCAL);
        final RegisteredMemory remote = a.allocateRegistered(SEGMENT, Access.REMOTE_READ);
        final long allocated = fixture.counter(MrdCounter.BYTES_ALLOCATED);
        final MrdException full =
            assertThrows(MrdException.class, () -> a.allocateRegistered(SEGMENT, Access.REMOTE_WRITE));
        assertEquals(ErrorCode.ENOMEM, full.code(), full::oneLine);
        assertEquals(allocated, fixture.counter(MrdCounter.BYTES_ALLOCATED),
            () -> "the failed ALLOC's memory was freed again: " + full.oneLine());
        assertEquals(List.of(), Invariants.check(ControlFileSnapshot.read(a.controlFile())));
        // and the client is still usable, the other memory still registered
        assertEquals(local.keyPair(), a.newCache().keyPair(local.segment().address(), SEGMENT));
        a.free(remote);
        a.free(local);
        assertClean("after the frees");
    }

    private void assertClean(final String when)
    {
        assertEquals(List.of(), Invariants.check(ControlFileSnapshot.read(a.controlFile())), when);
        assertEquals(0, fixture.counter(MrdCounter.BYTES_ALLOCATED), when + ": nothing allocated");
    }
}
