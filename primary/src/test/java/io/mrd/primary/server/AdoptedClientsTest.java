package io.mrd.primary.server;

import io.mrd.layout.ClientDescriptor;
import io.mrd.layout.ClientRecord;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrdException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The clients a successor adopts: read from the predecessor's client table and from the owners of its memory;
 * each claimed back once, by the process the predecessor recorded, within the grace period only.
 */
final class AdoptedClientsTest
{
    @TempDir
    Path dir;

    @Test
    void clientsComeFromTheTableAndFromOwnersOfMemoryAndEachIsClaimedOnceByItsOwnProcess()
    {
        try (ControlFile ctl = ControlFile.create(dir.resolve(ControlFile.FILE_NAME),
            ControlFileLayout.compute(1, 8, 16, 16, 4), 4096))
        {
            new ClientRecord().wrap(ctl.buffer(), ctl.layout().clientOffset(2)).id(7).pid(1234).uid(1000).gid(1000)
                .name("worker").state(ClientDescriptor.STATE_CONNECTED);
            final MemsegListRecord list = new MemsegListRecord().wrap(ctl.buffer(), ctl.layout().memsegListOffset(0))
                .segmentCount(8);
            list.segment(3, 9, 3, 0);
            final AdoptedClients adopted = AdoptedClients.read(ctl);
            assertEquals(List.of(new AdoptedClients.Client(7, 1234, 1000, "worker"),
                new AdoptedClients.Client(9, 0, -1, "")), adopted.clients());
            assertEquals(10, adopted.firstNewId(), "new ids start above every adopted one");

            assertEquals(ErrorCode.EPERM, assertThrows(MrdException.class, () -> adopted.claim(7, 4321, 1000)).code(),
                "another process may not resume client 7");
            assertEquals(ErrorCode.EPERM, assertThrows(MrdException.class, () -> adopted.claim(7, 1234, 0)).code(),
                "nor another uid");
            assertEquals(ErrorCode.ESRCH, assertThrows(MrdException.class, () -> adopted.claim(8, 1234, 1000)).code(),
                "an id the predecessor never gave");
            adopted.claim(7, 1234, 1000);
            assertEquals(ErrorCode.ESRCH, assertThrows(MrdException.class, () -> adopted.claim(7, 1234, 1000)).code(),
                "claimed once");
            assertEquals(List.of(new AdoptedClients.Client(9, 0, -1, "")), adopted.expire(),
                "the grace period's end reclaims who did not come back");
            final MrdException late = assertThrows(MrdException.class, () -> adopted.claim(9, 0, -1));
            assertEquals(ErrorCode.ESRCH, late.code());
            assertEquals(true, late.getMessage().contains("grace period"), late.getMessage());
        }
    }
}
