/**
 * The {@code mrd} command: {@code Mrd} and one picocli class per subcommand ({@code StartCommand} ...
 * {@code DemoCommand}), with the options several of them take ({@code DirOption} for the commands that talk to
 * a daemon, {@code ControlFileOption} for those that only read its control file, {@code SettingOptions} for
 * {@code mrd start}'s options made from the daemon's setting rows) and the command-line converters
 * ({@code SizeConverter}).
 * <p>
 * Belongs here: parsing a command line, calling the daemon, the client or the tools, and printing the result
 * ({@code DumpJson}, {@code AddressMap} for {@code mrd dump}; {@code WorkerRunner} for {@code mrd worker}'s
 * lookup threads). Does not belong here: how anything is formatted ({@code io.mrd.tools.Format}, shared with
 * the invariants), what a control file holds or must hold ({@code io.mrd.tools}), and the names, defaults,
 * parsers, checks or help of the daemon's settings, which are the rows of its {@code DaemonSettings}. A command
 * never borrows a helper from another command: what two commands share gets a class of its own. The commands
 * that only read ({@code status}, {@code stat}, {@code dump}, {@code check}, {@code lookup}, {@code events},
 * {@code stop}) use the tools and nothing of {@code io.mrd.primary}, and neither do the options and formatters
 * they use ({@code ReadOnlyCommandsTest}).
 */
package io.mrd.cli;
