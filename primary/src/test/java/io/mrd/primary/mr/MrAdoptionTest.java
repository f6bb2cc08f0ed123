package io.mrd.primary.mr;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrdException;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A successor's adoption of the MR table ({@link MrAdoption}) when its predecessor died at the collector's worst
 * moment: a DETACHED record whose deregistration the device had done but whose record was not cleared yet. The
 * predecessor is a live engine held inside its collector's deregistration (the record DETACHED, the global
 * cache without it, as at the kill); the successor's provider no longer knows that MR, as the device would not.
 */
final class MrAdoptionTest
{
    private static final long BASE = BaseAddresses.next();

    @Test
    void aDetachedRecordWhoseMrIsGoneIsClearedAndTheRestAdopted() throws Exception
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).extend(false)))
        {
            final Allocation kept = f.engine.allocate(EngineFixture.SEGMENT, 1);
            final int keptLkey = f.engine.createMr(kept.address(), 1).lkey;
            final Allocation freed = f.engine.allocate(EngineFixture.SEGMENT, 2);
            final int goneLkey = f.engine.createMr(freed.address(), 2).lkey;
            final CountDownLatch inDeregistration = new CountDownLatch(1);
            final CountDownLatch letGo = new CountDownLatch(1);
            f.registrar.beforeDeregister = registration ->
            {
                inDeregistration.countDown();
                awaitQuietly(letGo);
            };
            final Thread free = Thread.ofPlatform().start(() ->
                f.engine.freeMemory(freed.address(), freed.length(), freed.owner()));
            try
            {
                assertTrue(inDeregistration.await(30, TimeUnit.SECONDS), "the collector reached the deregistration");
                final RecordedMr detached = only(f.mrs(), goneLkey);
                assertEquals(MrDescriptor.STATE_DETACHED, detached.state());

                final DeviceAfterTheCrash device = new DeviceAfterTheCrash(goneLkey);
                final MrEngine successor = MrEngine.adopting(f.ctl, f.memory, device, f.counters, f.errorLog, false,
                    EventJournal.OFF);
                assertEquals(1, successor.adoptedMrs(), "the ACTIVE MR is adopted");
                assertEquals(List.of(keptLkey), f.mrs().stream().map(RecordedMr::lkey).toList(),
                    "the gone MR's record is cleared, the kept one is left as it was");
                assertEquals(List.of(), device.deregistered, "nothing is deregistered: the gone MR was already");
                assertEquals(List.of(goneLkey, keptLkey).stream().sorted().toList(),
                    device.asked.stream().sorted().toList(), "both records were offered to the provider");
            }
            finally
            {
                letGo.countDown();
                free.join();
            }
        }
    }

    @Test
    void anActiveRecordTheProviderRefusesStillFailsTheAdoption()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).extend(false)))
        {
            final Allocation allocation = f.engine.allocate(EngineFixture.SEGMENT, 1);
            final int lkey = f.engine.createMr(allocation.address(), 1).lkey;
            final MrdException refused = assertThrows(MrdException.class, () -> MrEngine.adopting(f.ctl, f.memory,
                new DeviceAfterTheCrash(lkey), f.counters, f.errorLog, false, EventJournal.OFF));
            assertEquals(ErrorCode.EINVAL, refused.code());
        }
    }

    private static RecordedMr only(final List<RecordedMr> mrs, final int lkey)
    {
        final List<RecordedMr> found = mrs.stream().filter(mr -> mr.lkey() == lkey).toList();
        assertEquals(1, found.size(), mrs.toString());
        return found.getFirst();
    }

    private static void awaitQuietly(final CountDownLatch latch)
    {
        try
        {
            latch.await(60, TimeUnit.SECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The device a successor imports from: it knows every recorded MR but the one whose deregistration the
     * predecessor finished (import fails EINVAL, as {@code ibv_import_mr} of a freed handle does).
     */
    private static final class DeviceAfterTheCrash implements Registrar
    {
        private final int goneLkey;
        final List<Integer> asked = new ArrayList<>();
        final List<Integer> deregistered = new ArrayList<>();

        DeviceAfterTheCrash(final int goneLkey)
        {
            this.goneLkey = goneLkey;
        }

        public String name()
        {
            return "device-after-the-crash";
        }

        public Registration register(final long address, final long length, final int access)
        {
            throw new AssertionError("an adoption registers nothing");
        }

        public Registration adopt(final Registration recorded, final int access)
        {
            asked.add(recorded.lkey());
            if (recorded.lkey() == goneLkey)
            {
                throw new MrdException(ErrorCode.EINVAL, "ibv_import_mr: no MR of lkey " + goneLkey);
            }
            return recorded;
        }

        public void deregister(final Registration registration)
        {
            deregistered.add(registration.lkey());
        }

        public long pinnedBytes()
        {
            return 0;
        }

        public void close()
        {
        }
    }
}
