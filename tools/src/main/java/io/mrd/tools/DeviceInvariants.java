package io.mrd.tools;

import io.mrd.layout.Access;
import io.mrd.layout.DeviceDescriptor;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.RemoteAccess;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * {@link Invariants}' part about devices (docs/multi-device.md): the device table, and every MR's keys and
 * handle on each device. An MR in use (ACTIVE or DETACHED: still registered until collected) has keys on every
 * device of the daemon its access places it on ({@link Access#isOn}) and none on the others, each with an rkey
 * exactly when it has remote access, device 0's equal to its record's (zeros when it is not placed there);
 * no two MRs share an lkey or a device handle on one device; a row has nothing past the daemon's devices, and a
 * FREE record's row is empty. Each violation is one line naming the MR, the device and the values.
 * <p>
 * Keys of two devices are not compared with each other: the emulated device's keys name their device, but a
 * real HCA may issue one MR equal keys on two devices (docs/multi-device.md), so equal keys across devices are
 * no fault of mrd's.
 */
final class DeviceInvariants
{
    /** The record's keys of an MR not placed on device 0. */
    private static final DeviceSnapshot.Keys NOT_PLACED =
        new DeviceSnapshot.Keys(0, Access.NO_RKEY, MrDescriptor.NO_DEVICE_HANDLE);

    private DeviceInvariants()
    {
    }

    /**
     * Adds the violations of {@code snapshot}'s devices and key table to {@code violations}.
     */
    static void check(final ControlFileSnapshot snapshot, final List<String> violations)
    {
        final DeviceSnapshot devices = snapshot.devices();
        checkTable(snapshot.header(), devices, violations);
        final List<Map<Integer, Integer>> byLkey = new ArrayList<>();
        final List<Map<Integer, Integer>> byHandle = new ArrayList<>();
        for (int d = 0; d < devices.keyColumns(); d++)
        {
            byLkey.add(new HashMap<>());
            byHandle.add(new HashMap<>());
        }
        for (final ControlFileSnapshot.Mr mr : snapshot.mrs())
        {
            if (mr.state() != MrDescriptor.STATE_ACTIVE && mr.state() != MrDescriptor.STATE_DETACHED)
            {
                continue;
            }
            final String name = "MR " + mr.index();
            if (Access.isOn(mr.access(), 0))
            {
                checkDeviceHandle(name, mr, snapshot.header(), byHandle.getFirst(), violations);
            }
            checkRow(name, mr, snapshot.header(), devices, byLkey, byHandle, violations);
        }
        for (final Map.Entry<Integer, List<DeviceSnapshot.Keys>> row : devices.rows().entrySet())
        {
            if (null == snapshot.mr(row.getKey()))
            {
                violations.add("MR key table row " + row.getKey() + " holds " + describe(row.getValue()) +
                    " but MR " + row.getKey() + " is FREE: freeing a record clears its row");
            }
        }
    }

    /**
     * The header's count bounds the table, and device 0 is the one the header names too (what a reader of an
     * older layout, and {@code mrd status}, see).
     */
    private static void checkTable(
        final ControlFileSnapshot.Header header, final DeviceSnapshot devices, final List<String> violations)
    {
        if (devices.count() < 0 || devices.count() > DeviceDescriptor.MAX_DEVICES)
        {
            violations.add("header: device count " + devices.count() + " outside [0, " + DeviceDescriptor.MAX_DEVICES +
                "]");
        }
        final boolean hasDevice = header.pdHandle() != HeaderDescriptor.NO_PD_HANDLE;
        if (hasDevice == devices.devices().isEmpty())
        {
            violations.add("header: device count " + devices.count() + " but " + (hasDevice ?
                "PD handle " + header.pdHandle() + " of the device " + header.device() : "no PD handle") +
                ": a daemon with a device counts it");
        }
        for (final DeviceSnapshot.Device device : devices.devices())
        {
            if (device.name().isEmpty())
            {
                violations.add("device " + device.number() + ": no name in the device table");
            }
        }
        if (!devices.devices().isEmpty())
        {
            final DeviceSnapshot.Device first = devices.devices().getFirst();
            if (!first.name().equals(header.device()) || first.pdHandle() != header.pdHandle())
            {
                violations.add("device 0: " + first.name() + " PD handle " + first.pdHandle() +
                    " in the device table, but the header names " + header.device() + " PD handle " +
                    header.pdHandle());
            }
        }
    }

    /**
     * An MR's device handle is what a successor imports it by (docs/adoption.md): a daemon with a device records
     * one per MR, each its own; a daemon without one records none.
     */
    private static void checkDeviceHandle(
        final String name, final ControlFileSnapshot.Mr mr, final ControlFileSnapshot.Header header,
        final Map<Integer, Integer> byHandle, final List<String> violations)
    {
        if (header.pdHandle() == HeaderDescriptor.NO_PD_HANDLE)
        {
            if (mr.deviceHandle() != MrDescriptor.NO_DEVICE_HANDLE)
            {
                violations.add(name + ": device handle " + mr.deviceHandle() + " on a daemon without a device " +
                    "(PD handle " + HeaderDescriptor.NO_PD_HANDLE + ")");
            }
            return;
        }
        if (mr.deviceHandle() < 0)
        {
            violations.add(name + ": device handle " + mr.deviceHandle() + " on a daemon with the device " +
                header.device() + " (PD handle " + header.pdHandle() + "): it cannot be imported by it");
            return;
        }
        final Integer other = byHandle.putIfAbsent(mr.deviceHandle(), mr.index());
        if (null != other)
        {
            violations.add(name + ": device handle " + mr.deviceHandle() + " is also the handle of MR " + other);
        }
    }

    /**
     * The MR's row of the key table: device 0's entry repeats the record (the hit path of device 0 reads the
     * record's copy, a device cache the row's), each further device has keys of its own on that device, and
     * nothing is written past the daemon's devices. Device 0's lkey and handle are unique by the record's checks.
     */
    private static void checkRow(
        final String name, final ControlFileSnapshot.Mr mr, final ControlFileSnapshot.Header header,
        final DeviceSnapshot devices, final List<Map<Integer, Integer>> byLkey,
        final List<Map<Integer, Integer>> byHandle, final List<String> violations)
    {
        final DeviceSnapshot.Keys first = devices.keys(mr.index(), 0);
        final DeviceSnapshot.Keys record = new DeviceSnapshot.Keys(mr.lkey(), mr.rkey(), mr.deviceHandle());
        final boolean onFirst = Access.isOn(mr.access(), 0);
        if (onFirst ? !first.equals(record) : !first.isEmpty() || !NOT_PLACED.equals(record))
        {
            violations.add(name + ": " + describe(first) + " on device 0 in the MR key table, and " +
                describe(record) + " in its record" + (onFirst ? ", which differ" : ", but its access " +
                Access.describe(mr.access()) + " does not place it on device 0: both are " + describe(NOT_PLACED) +
                " then, with an empty entry"));
        }
        for (int d = 1; d < devices.keyColumns(); d++)
        {
            final String on = name + " on device " + d + " (" + devices.devices().get(d).name() + ")";
            final DeviceSnapshot.Keys keys = devices.keys(mr.index(), d);
            if (!Access.isOn(mr.access(), d))
            {
                if (!keys.isEmpty())
                {
                    violations.add(on + ": " + describe(keys) + " in the MR key table, but its access " +
                        Access.describe(mr.access()) + " does not place it on that device");
                }
                continue;
            }
            if (keys.isEmpty())
            {
                violations.add(on + ": no keys: its row of the MR key table is empty, a secondary's cache of " +
                    "that device would get lkey 0");
                continue;
            }
            if (!RemoteAccess.isRightRkey(mr.access(), keys.rkey()))
            {
                violations.add(on + ": rkey " + Format.key(keys.rkey()) + " with access " +
                    Access.describe(mr.access()) + ": an MR has an rkey exactly when it has remote access");
            }
            final Integer lkeyOwner = byLkey.get(d).putIfAbsent(keys.lkey(), mr.index());
            if (null != lkeyOwner)
            {
                violations.add(on + ": lkey " + Format.key(keys.lkey()) + " is also the lkey of MR " + lkeyOwner +
                    " on that device");
            }
            if (keys.deviceHandle() < 0)
            {
                violations.add(on + ": device handle " + keys.deviceHandle() + " on a daemon with the device " +
                    "(PD handle " + devices.devices().get(d).pdHandle() + "): it cannot be imported by it");
            }
            else
            {
                final Integer handleOwner = byHandle.get(d).putIfAbsent(keys.deviceHandle(), mr.index());
                if (null != handleOwner)
                {
                    violations.add(on + ": device handle " + keys.deviceHandle() + " is also the handle of MR " +
                        handleOwner + " on that device");
                }
            }
        }
        for (int d = devices.keyColumns(); d < DeviceDescriptor.MAX_DEVICES; d++)
        {
            final DeviceSnapshot.Keys keys = devices.keys(mr.index(), d);
            if (!keys.isEmpty())
            {
                violations.add(name + ": " + describe(keys) + " on device " + d + " in the MR key table, past the " +
                    Format.plural(devices.keyColumns(), "column") + " the daemon writes");
            }
        }
    }

    private static String describe(final DeviceSnapshot.Keys keys)
    {
        return "lkey " + Format.key(keys.lkey()) + " rkey " + Format.key(keys.rkey()) + " handle " +
            keys.deviceHandle();
    }

    /**
     * @return the entries of a row that are not empty, each with its device.
     */
    private static String describe(final List<DeviceSnapshot.Keys> row)
    {
        final List<String> written = new ArrayList<>();
        for (int d = 0; d < row.size(); d++)
        {
            if (!row.get(d).isEmpty())
            {
                written.add(describe(row.get(d)) + " on device " + d);
            }
        }
        return String.join(", ", written);
    }
}
