package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.EmulatorSettings;
import io.mrd.testing.LiveObjects;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static io.mrd.layout.sys.Sizes.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The ibverbs provider on several emulated devices ({@code --device} a list or {@code all}): one registration
 * is one MR on every device, each with that device's keys, counted once against the pinned bytes; a device list
 * that cannot be opened is refused at start with nothing left open. The undo of a failure at every step is
 * {@code MultiDeviceFaultTest}'s (through the engine).
 */
final class MultiDeviceRegistrarTest
{
    private static Path emulator;

    private final List<IbverbsRegistrar> registrars = new ArrayList<>();
    private Arena memory;

    @BeforeAll
    static void buildTheEmulator()
    {
        emulator = EmulatedDevice.library();
    }

    @BeforeEach
    void allocate()
    {
        memory = Arena.ofShared();
        EmulatorSettings.devices(4);
    }

    @AfterEach
    void closeEverything()
    {
        registrars.forEach(IbverbsRegistrar::close);
        memory.close();
        EmulatorSettings.reset();
    }

    @Test
    void oneRegistrationIsAnMrOnEveryDeviceWithThatDevicesKeys()
    {
        final IbverbsRegistrar ibverbs = registrar(ProviderConfig.ALL_DEVICES);
        assertEquals(List.of("mrdemu0", "mrdemu1", "mrdemu2", "mrdemu3"), ibverbs.deviceNames());
        final MemorySegment buffer = memory.allocate(4 * MIB, 4096);

        final Registration registration = ibverbs.register(buffer.address(), 4 * MIB,
            Access.LOCAL_WRITE | Access.REMOTE_READ | Access.RELAXED_ORDERING);
        assertEquals(4, registration.deviceCount());
        final Set<Integer> keys = new HashSet<>();
        for (int device = 0; device < 4; device++)
        {
            final Registration.DeviceMr mr = registration.on(device);
            // The emulated device's keys name the device that issued them: (device << 18 | index) << 8 | variant.
            assertEquals(device, mr.lkey() >>> 26, "device of lkey " + Integer.toHexString(mr.lkey()));
            assertEquals(mr.lkey(), mr.rkey(), "rkey of a remote-read MR on device " + device);
            assertTrue(keys.add(mr.lkey()), "a key of its own on device " + device);
            assertEquals(1, mrsOn(ibverbs, device), "MRs on device " + device);
        }
        assertEquals(registration.lkey(), registration.on(0).lkey(), "device 0's keys are the registration's");
        assertEquals(4 * MIB, ibverbs.pinnedBytes(), "pinned once, whatever the device count");

        ibverbs.deregister(registration);
        assertNothingLeft(ibverbs, "after deregistering");
    }

    @Test
    void aPlacedRegistrationIsAnMrOnTheDevicesOfItsPlacementOnly()
    {
        final IbverbsRegistrar ibverbs = registrar(ProviderConfig.ALL_DEVICES);
        final MemorySegment buffer = memory.allocate(2 * MIB, 4096);

        final Registration registration = ibverbs.register(buffer.address(), 2 * MIB,
            Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.onDevices(1, 3));
        assertEquals(4, registration.deviceCount(), "one entry per device of the daemon");
        for (int device = 0; device < 4; device++)
        {
            final boolean placed = 1 == device || 3 == device;
            assertEquals(placed, registration.on(device).isPlaced(), "placed on device " + device);
            assertEquals(placed ? 1 : 0, mrsOn(ibverbs, device), "MRs on device " + device);
            if (placed)
            {
                assertEquals(device, registration.on(device).lkey() >>> 26, "device of its lkey");
            }
        }
        assertEquals(Registration.DeviceMr.NOT_PLACED, registration.on(0), "no MR on device 0, none in its fields");
        assertEquals(2 * MIB, ibverbs.pinnedBytes());

        ibverbs.deregister(registration);
        assertNothingLeft(ibverbs, "after deregistering");
    }

    @Test
    void aListOpensThoseDevicesInItsOrder()
    {
        final IbverbsRegistrar ibverbs = registrar("mrdemu2, mrdemu0");
        assertEquals(List.of("mrdemu2", "mrdemu0"), ibverbs.deviceNames());
        assertEquals("mrdemu2", ibverbs.deviceName(), "device 0 is the first named");
        final MemorySegment buffer = memory.allocate(MIB, 4096);
        final Registration registration = ibverbs.register(buffer.address(), MIB, Access.LOCAL_WRITE);
        assertEquals(2, registration.lkey() >>> 26, "device 0's key is mrdemu2's");
        assertEquals(0, registration.on(1).lkey() >>> 26, "device 1's key is mrdemu0's");
        assertEquals(Access.NO_RKEY, registration.on(1).rkey(), "no rkey without remote access, on any device");
        ibverbs.deregister(registration);
    }

    @Test
    void aDeviceListThatCannotBeOpenedIsRefusedNamingWhatIsWrong()
    {
        refused(ErrorCode.EINVAL, "mrdemu0,mrdemu0", "--device 'mrdemu0,mrdemu0' has device mrdemu0 twice");
        refused(ErrorCode.EINVAL, "mrdemu0,", "--device 'mrdemu0,' has an empty device name");
        refused(ErrorCode.EINVAL, "all,mrdemu1", "--device 'all,mrdemu1' has 'all' beside device names");
        refused(ErrorCode.EINVAL, "a,b,c,d,e,f,g,h,i", "names 9 devices, more than the 8 one daemon registers on");
        // The last device is missing: the ones opened before it are closed again.
        refused(ErrorCode.ENODEV, "mrdemu0,mrdemu1,mrdemu7", "RDMA device 'mrdemu7' not found; devices found: " +
            "mrdemu0, mrdemu1, mrdemu2, mrdemu3");
        assertEquals(0, LiveObjects.of(emulator, MemorySegment.NULL).pds(), "PDs left open by refused lists");
    }

    @Test
    void aFailureOnOneDeviceDeregistersTheOthersAndUnpins()
    {
        final IbverbsRegistrar ibverbs = new IbverbsRegistrar(config(ProviderConfig.ALL_DEVICES)
            .withFaultPoint(new FaultPoint(3, 1, FaultPoint.Step.REGISTER)));
        registrars.add(ibverbs);
        final MemorySegment buffer = memory.allocate(MIB, 4096);
        final MrdException ex = assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), MIB, Access.LOCAL_WRITE));
        assertEquals("ENOMEM: injected failure at REGISTER of registration #1 on device 3", ex.oneLine());
        assertNothingLeft(ibverbs, "after the failure");

        final Registration next = ibverbs.register(buffer.address(), MIB, Access.LOCAL_WRITE);
        assertEquals(4, next.deviceCount(), "the next registration is on every device");
        ibverbs.deregister(next);
    }

    /** No MR on any device, nothing pinned, no registration live. */
    private static void assertNothingLeft(final IbverbsRegistrar ibverbs, final String when)
    {
        for (int device = 0; device < 4; device++)
        {
            assertEquals(0, mrsOn(ibverbs, device), "MRs on device " + device + " " + when);
        }
        assertEquals(0, ibverbs.pinnedBytes(), "pinned bytes " + when);
        assertEquals(0, ibverbs.liveCount(), "live registrations " + when);
    }

    private void refused(final ErrorCode code, final String devices, final String expected)
    {
        final MrdException ex = assertThrows(MrdException.class, () -> registrar(devices), devices);
        assertEquals(code, ex.code(), ex.oneLine());
        assertTrue(ex.getMessage().contains(expected), ex.oneLine());
    }

    private IbverbsRegistrar registrar(final String devices)
    {
        final IbverbsRegistrar registrar = new IbverbsRegistrar(config(devices));
        registrars.add(registrar);
        return registrar;
    }

    private static ProviderConfig config(final String devices)
    {
        return ProviderConfig.ibverbs().withLibraryPath(emulator).withDeviceName(devices);
    }

    private static int mrsOn(final IbverbsRegistrar registrar, final int device)
    {
        return LiveObjects.of(emulator, registrar.sharedDevices().get(device).context()).mrs();
    }
}
