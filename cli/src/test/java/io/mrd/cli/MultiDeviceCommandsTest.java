package io.mrd.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner.Result;
import io.mrd.layout.Access;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.DeviceDescriptor;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.KeyPair;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.PromtoolCheck;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.Format;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static io.mrd.cli.CorruptedCopies.assertViolation;
import static io.mrd.cli.CorruptedCopies.checkCopy;
import static io.mrd.cli.CorruptedCopies.getInt;
import static io.mrd.cli.CorruptedCopies.putInt;
import static io.mrd.cli.fixture.MrdRunner.mrd;
import static io.mrd.layout.sys.Sizes.hex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd dump}, {@code lookup}, {@code check}, {@code events} and {@code stat --prometheus} on a daemon that
 * registers every MR on two emulated devices ({@code MRDEMU_DEVICES=2}, {@code --device all}): each shows the keys
 * of each device, as the secondary that allocated the memory got them ({@code RegisteredMemory.keys(device)}),
 * and {@code check} finds a fault planted in the device table or the MR key table of a copy of the file. The
 * one-device output, which these leave unchanged, is {@link ControlFileCommandsTest}'s.
 * <p>
 * One daemon for the class, started by the first test's {@code @BeforeAll}: the tests only read its file, and
 * write into copies of it.
 */
final class MultiDeviceCommandsTest
{
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int LENGTH = 64 * 1024;
    private static final String REMOTE = "local-write,remote-write,remote-read";

    @RegisterExtension
    static final DaemonExtension DAEMONS = new DaemonExtension();

    private static Path dir;
    private static LiveDaemon daemon;
    private static MrdClient client;
    /** An allocation with remote access (an rkey on each device) and one without. */
    private static RegisteredMemory remote;
    private static RegisteredMemory local;
    private static ControlFileSnapshot.Mr remoteMr;
    private static ControlFileSnapshot.Mr localMr;

    @BeforeAll
    static void startOnTwoDevices()
    {
        final Path library = EmulatedDevice.library();
        dir = DAEMONS.newDirectory("devices-commands");
        daemon = DAEMONS.launch("devices-commands").in(dir)
            .env(Map.of(EmulatedDevice.LIBRARY_ENV, library.toString(), EmulatedDevice.DEVICES_ENV, "2"))
            .start("--heartbeat-interval", "1000", "--provider", "ibverbs", "--device", "all",
                "--max-memory", "64MiB", "--list-size", "32MiB", "--max-mrs", "64", "--cache-capacity", "256");
        client = MrdClient.attach(new ClientContext().dir(dir).name("devices").ibverbsLibrary(library.toString()));
        remote = client.allocateRegistered(LENGTH, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
        local = client.allocateRegistered(LENGTH, Access.LOCAL_WRITE);
        final ControlFileSnapshot snapshot = daemon.snapshot();
        remoteMr = mrOf(snapshot, remote);
        localMr = mrOf(snapshot, local);
    }

    @AfterAll
    static void closeTheClient()
    {
        if (null != client)
        {
            client.close();
        }
    }

    @Test
    void dumpListsTheDevicesAndEachMrsKeysOnEach() throws IOException
    {
        final Result text = mrd("dump", "--dir", dir.toString());
        assertEquals(0, text.exit(), text.both());
        assertTrue(text.out().lines().anyMatch(l -> l.matches(
            "devices       2: 0 mrdemu0 PD handle \\d+, 1 mrdemu1 PD handle \\d+")), text.out());
        for (final RegisteredMemory memory : List.of(remote, local))
        {
            for (int device = 0; device < 2; device++)
            {
                final String line = String.format("      device %d %-12s lkey %-10s rkey %-10s handle ", device,
                    "mrdemu" + device, Format.key(KeyPair.lkey(memory.keys(device))),
                    Format.key(KeyPair.rkey(memory.keys(device))));
                assertTrue(text.out().contains(line), "'" + line + "' in:\n" + text.out());
            }
        }

        final JsonNode root = JSON.readTree(mrd("dump", "--dir", dir.toString(), "--json").out());
        final JsonNode devices = root.get("daemon").get("devices");
        assertEquals(2, devices.size(), devices.toString());
        assertEquals("mrdemu1", devices.get(1).get("name").asText());
        assertEquals(1, devices.get(1).get("number").asInt());
        assertEquals(root.get("daemon").get("pdHandle").asInt(), devices.get(0).get("pdHandle").asInt());
        for (final JsonNode mr : root.get("mrs"))
        {
            final JsonNode keys = mr.get("keys");
            assertEquals(2, keys.size(), mr.toString());
            assertEquals(mr.get("lkey").asText(), keys.get(0).get("lkey").asText(), "device 0's are the record's");
            assertEquals(mr.get("deviceHandle").asInt(), keys.get(0).get("deviceHandle").asInt());
            assertNotEquals(keys.get(0).get("lkey").asText(), keys.get(1).get("lkey").asText(), mr.toString());
            final RegisteredMemory memory = mr.get("index").asInt() == remoteMr.index() ? remote : local;
            assertEquals("mrdemu1", keys.get(1).get("name").asText());
            assertEquals(Format.key(KeyPair.lkey(memory.keys(1))), keys.get(1).get("lkey").asText(), mr.toString());
            assertEquals(Format.key(KeyPair.rkey(memory.keys(1))), keys.get(1).get("rkey").asText(), mr.toString());
        }
    }

    @Test
    void lookupGivesEachDevicesKeys()
    {
        final long address = remote.segment().address() + 100;
        final Result lookup = mrd("lookup", "--dir", dir.toString(), hex(address));
        assertEquals(0, lookup.exit(), lookup.both());
        final List<String> lines = lookup.out().lines().toList();
        assertEquals(3, lines.size(), lookup.out());
        assertEquals(hex(address) + " -> MR " + remoteMr.index() + " " +
            Format.range(remoteMr.start(), remoteMr.end()) + " lkey " + Format.key(KeyPair.lkey(remote.keys(0))) +
            " rkey " + Format.key(KeyPair.rkey(remote.keys(0))) + " access " + REMOTE, lines.get(0),
            "the first line as with one device");
        for (int device = 0; device < 2; device++)
        {
            assertEquals(String.format("  device %d %-12s", device, "mrdemu" + device) + " lkey " +
                Format.key(KeyPair.lkey(remote.keys(device))) + " rkey " +
                Format.key(KeyPair.rkey(remote.keys(device))), lines.get(1 + device));
        }
        final Result localLookup = mrd("lookup", "--dir", dir.toString(), hex(local.segment().address()));
        assertTrue(localLookup.out().contains("  device 1 mrdemu1      lkey " +
            Format.key(KeyPair.lkey(local.keys(1))) + " rkey 0x0\n"), localLookup.out());
    }

    @Test
    void checkPassesAndFindsEachFaultOfTheKeyTable() throws IOException
    {
        final Result live = mrd("check", "--dir", dir.toString());
        assertEquals(0, live.exit(), live.both());
        assertTrue(live.out().strip().endsWith(", keys on 2 devices"), live.out());

        final ControlFileLayout layout = daemon.controlFile().layout();
        final int remoteOn1 = layout.mrKeyOffset(remoteMr.index(), 1);
        final int localOn1 = layout.mrKeyOffset(localMr.index(), 1);
        final String onDevice1 = "MR " + remoteMr.index() + " on device 1 (mrdemu1): ";

        assertViolation(checkCopy(dir, "empty-row", file -> CorruptedCopies.write(file, remoteOn1,
            new byte[DeviceDescriptor.KEY_ENTRY_LENGTH])), onDevice1 + "no keys");
        // The MR of the higher slot is the one named: the check meets the other first.
        assertViolation(checkCopy(dir, "same-lkey", file -> putInt(file, localOn1 + DeviceDescriptor.LKEY_OFFSET,
            getInt(file, remoteOn1 + DeviceDescriptor.LKEY_OFFSET))), "MR " +
            Math.max(localMr.index(), remoteMr.index()) + " on device 1 (mrdemu1): lkey " +
            Format.key(KeyPair.lkey(remote.keys(1))) + " is also the lkey of MR " +
            Math.min(localMr.index(), remoteMr.index()) + " on that device");
        assertViolation(checkCopy(dir, "rkey", file -> putInt(file, localOn1 + DeviceDescriptor.RKEY_OFFSET, 0x77)),
            "MR " + localMr.index() + " on device 1 (mrdemu1): rkey 0x77 with access local-write");
        assertViolation(checkCopy(dir, "handle", file -> putInt(file,
            remoteOn1 + DeviceDescriptor.DEVICE_HANDLE_OFFSET, -1)), onDevice1 + "device handle -1");
        assertViolation(checkCopy(dir, "device-0", file -> putInt(file,
            layout.mrKeyOffset(remoteMr.index(), 0) + DeviceDescriptor.LKEY_OFFSET, 0x1234)),
            "MR " + remoteMr.index() + ": lkey 0x1234 rkey ");
        assertViolation(checkCopy(dir, "past", file -> putInt(file, layout.mrKeyOffset(remoteMr.index(), 2) +
            DeviceDescriptor.LKEY_OFFSET, 0x99)), "MR " + remoteMr.index() + ": lkey 0x99 rkey 0x0 handle 0 on " +
            "device 2 in the MR key table, past the 2 columns the daemon writes");
        // A FREE slot below the high-water mark with keys in its row: the mark raised over the first unused slot.
        final int free = daemon.snapshot().header().mrHighWater();
        assertViolation(checkCopy(dir, "free-row", file ->
        {
            putInt(file, HeaderDescriptor.MR_HIGH_WATER_OFFSET, free + 1);
            putInt(file, layout.mrKeyOffset(free, 1) + DeviceDescriptor.LKEY_OFFSET, 0x42);
        }), "MR key table row " + free + " holds lkey 0x42 rkey 0x0 handle 0 on device 1 but MR " + free +
            " is FREE");
        assertViolation(checkCopy(dir, "count", file -> putInt(file, HeaderDescriptor.DEVICE_COUNT_OFFSET, 9)),
            "header: device count 9 outside [0, 8]");
        assertViolation(checkCopy(dir, "name", file -> CorruptedCopies.write(file, layout.deviceOffset(1) +
            DeviceDescriptor.NAME_OFFSET, new byte[DeviceDescriptor.NAME_LENGTH])), "device 1: no name");
    }

    @Test
    void eventsGiveTheFurtherDevicesKeysAfterEachMrCreated() throws IOException
    {
        final Result text = mrd("events", "--dir", dir.toString());
        assertEquals(0, text.exit(), text.both());
        final List<String> lines = text.out().lines().toList();
        for (final RegisteredMemory memory : List.of(remote, local))
        {
            final ControlFileSnapshot.Mr mr = memory == remote ? remoteMr : localMr;
            final String keys = " lkey " + Format.key(KeyPair.lkey(memory.keys(0))) + " rkey " +
                Format.key(KeyPair.rkey(memory.keys(0))) + " mr " + mr.index();
            final int created = indexOf(lines, "MR_CREATED", keys);
            assertTrue(created >= 0, "MR_CREATED with '" + keys + "' in:\n" + text.out());
            assertTrue(lines.get(created + 1).contains(" MR_DEVICE_KEYS        client "), text.out());
            assertTrue(lines.get(created + 1).endsWith(" lkey " + Format.key(KeyPair.lkey(memory.keys(1))) +
                " rkey " + Format.key(KeyPair.rkey(memory.keys(1))) + " mr " + mr.index() + " device 1"),
                lines.get(created + 1));
        }
        assertEquals(2, lines.stream().filter(l -> l.contains(" MR_DEVICE_KEYS ")).count(), "one per MR and " +
            "further device:\n" + text.out());

        final Result json = mrd("events", "--dir", dir.toString(), "--json");
        JsonNode deviceKeys = null;
        for (final String line : json.out().lines().toList())
        {
            final JsonNode event = JSON.readTree(line);
            if ("MR_DEVICE_KEYS".equals(event.get("type").asText()) && event.get("mr").asInt() == remoteMr.index())
            {
                deviceKeys = event;
            }
        }
        assertTrue(null != deviceKeys, json.out());
        assertEquals(1, deviceKeys.get("device").asInt());
        assertEquals(Format.key(KeyPair.lkey(remote.keys(1))), deviceKeys.get("lkey").asText());
        assertEquals(Format.key(KeyPair.rkey(remote.keys(1))), deviceKeys.get("rkey").asText());
        assertEquals(hex(remoteMr.start()), deviceKeys.get("address").asText());
    }

    @Test
    void prometheusHasAnInfoSampleForEachDevice()
    {
        final Result prometheus = mrd("stat", "--dir", dir.toString(), "--prometheus");
        assertEquals(0, prometheus.exit(), prometheus.both());
        final Map<String, Double> samples = PromtoolCheck.samples(prometheus.out());
        assertEquals(1.0, samples.get("mrd_device_info{device=\"mrdemu0\",number=\"0\"}"), prometheus.out());
        assertEquals(1.0, samples.get("mrd_device_info{device=\"mrdemu1\",number=\"1\"}"), prometheus.out());
        assertFalse(samples.keySet().stream().anyMatch(name -> name.contains("number=\"2\"")), prometheus.out());
        PromtoolCheck.assertClean("mrd stat --prometheus on two devices", prometheus.out());
    }

    private static int indexOf(final List<String> lines, final String type, final String tail)
    {
        for (int i = 0; i < lines.size(); i++)
        {
            if (lines.get(i).contains(" " + type + " ") && lines.get(i).contains(tail))
            {
                return i;
            }
        }
        return -1;
    }

    private static ControlFileSnapshot.Mr mrOf(final ControlFileSnapshot snapshot, final RegisteredMemory memory)
    {
        final long address = memory.segment().address();
        return snapshot.mrs().stream().filter(mr -> mr.active() && mr.start() <= address && address < mr.end())
            .findFirst().orElseThrow(() -> new AssertionError("no MR covers " + hex(address) + ": " +
                LiveDaemon.describe(snapshot)));
    }
}
