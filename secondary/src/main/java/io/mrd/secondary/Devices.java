package io.mrd.secondary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.DeviceTable;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.util.ArrayList;
import java.util.List;

/**
 * The daemon's devices as a client numbers them: the device table of the control file, and the rule of which
 * device numbers an API call may name. A daemon without a device ({@code --provider soft}) has one set of keys,
 * numbered device 0.
 */
final class Devices
{
    private Devices()
    {
    }

    /**
     * @return the devices of the daemon, at least 1.
     */
    static int count(final ControlFile controlFile)
    {
        return Math.max(1, controlFile.header().deviceCount());
    }

    static String name(final ControlFile controlFile, final int device)
    {
        return 0 == controlFile.header().deviceCount() ? "" :
            new DeviceTable(controlFile.buffer(), controlFile.layout()).name(device);
    }

    /**
     * @throws MrdException EINVAL when {@code device} is not one of the daemon's, naming them.
     */
    static void check(final ControlFile controlFile, final int device)
    {
        final int count = count(controlFile);
        if (device < 0 || device >= count)
        {
            final List<String> names = new ArrayList<>(count);
            for (int d = 0; d < count; d++)
            {
                final String name = name(controlFile, d);
                names.add(d + (name.isEmpty() ? "" : " (" + name + ")"));
            }
            throw new MrdException(ErrorCode.EINVAL, "device " + device + " is not one of the daemon's " + count +
                " device" + (count == 1 ? "" : "s") + ": " + String.join(", ", names) + "; start the daemon with " +
                "--device naming the devices this process uses");
        }
    }
}
