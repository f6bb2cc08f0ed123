package io.mrd.cli;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.classfile.ClassFile;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.constantpool.PoolEntry;
import java.lang.classfile.constantpool.Utf8Entry;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The commands that only read a run directory, a control file or a journal use nothing of the daemon: what
 * they need is in {@code tools} (as Aeron keeps {@code AeronStat} out of the driver), so that they run beside a
 * daemon of another build and the daemon's module can change without them.
 * <p>
 * Checked on what the compiler produced, not on the text alone: each command's class file and every class of
 * {@code io.mrd.cli} it reaches (its options, converters, formatters, nested classes and lambdas; references in
 * code, in descriptors and in annotations alike) must name no class of {@code io.mrd.primary}; and the sources
 * of those classes must not import one, since an unused import leaves no trace in a class file. {@code Mrd}, the
 * root command, is checked but not followed: it names every command, the daemon's {@code start} among them.
 */
final class ReadOnlyCommandsTest
{
    private static final String PRIMARY = "io/mrd/primary/";
    private static final String CLI = "io/mrd/cli/";
    private static final String ROOT = CLI + "Mrd";
    private static final Pattern CLI_TYPE = Pattern.compile("L(" + CLI + "[\\w/$]+);");
    private static final Pattern PRIMARY_IMPORT = Pattern.compile("^import\\s+(static\\s+)?io\\.mrd\\.primary\\.",
        Pattern.MULTILINE);

    @ParameterizedTest(name = "{0}")
    @ValueSource(classes = {StatusCommand.class, StatCommand.class, DumpCommand.class, CheckCommand.class,
        LookupCommand.class, EventsCommand.class, StopCommand.class})
    void useNothingOfTheDaemon(final Class<?> command)
    {
        final Set<String> reached = reachedClasses(command.getName().replace('.', '/'));
        final List<String> uses = new ArrayList<>();
        for (final String name : reached)
        {
            for (final String entry : strings(name))
            {
                if (entry.contains(PRIMARY))
                {
                    uses.add(name + " names " + entry);
                }
            }
        }
        final Set<String> sources = new TreeSet<>();
        for (final String name : reached)
        {
            final int nested = name.indexOf('$');
            sources.add(nested < 0 ? name : name.substring(0, nested));
        }
        for (final String name : sources)
        {
            final Path source = ProjectRoot.path().resolve("cli/src/main/java").resolve(name + ".java");
            final Matcher imports = PRIMARY_IMPORT.matcher(read(source));
            while (imports.find())
            {
                uses.add(source + " imports from io.mrd.primary");
            }
        }
        assertTrue(sources.size() > 1, "the options at least are reached from " + command + ": " + sources);
        assertEquals(List.of(), uses, command.getSimpleName() + " reaches " + reached.size() + " classes of " +
            "io.mrd.cli in " + sources + ", which may use io.mrd.tools, io.mrd.layout or io.mrd.secondary, never " +
            "io.mrd.primary");
    }

    /**
     * @return the internal names of {@code start} and every class of {@code io.mrd.cli} it reaches, itself
     * included; {@link #ROOT} and its nested classes are included but not followed.
     */
    private static Set<String> reachedClasses(final String start)
    {
        final Set<String> reached = new TreeSet<>();
        final Deque<String> pending = new ArrayDeque<>(List.of(start));
        while (!pending.isEmpty())
        {
            final String name = pending.pop();
            if (!reached.add(name) || name.equals(ROOT) || name.startsWith(ROOT + "$"))
            {
                continue;
            }
            for (final String entry : strings(name))
            {
                if (entry.startsWith(CLI) && !entry.contains(";"))
                {
                    pending.push(entry);
                }
                final Matcher type = CLI_TYPE.matcher(entry);
                while (type.find())
                {
                    pending.push(type.group(1));
                }
            }
        }
        return reached;
    }

    /**
     * @return every class name and every string of the class file's constant pool: class references, method
     * and field descriptors, generic signatures, annotation values.
     */
    private static Set<String> strings(final String internalName)
    {
        final Set<String> strings = new TreeSet<>();
        try (InputStream in = ReadOnlyCommandsTest.class.getClassLoader().getResourceAsStream(internalName + ".class"))
        {
            if (null == in)
            {
                throw new AssertionError("no class file for " + internalName);
            }
            for (final PoolEntry entry : ClassFile.of().parse(in.readAllBytes()).constantPool())
            {
                if (entry instanceof ClassEntry c)
                {
                    strings.add(c.asInternalName());
                }
                else if (entry instanceof Utf8Entry u)
                {
                    strings.add(u.stringValue());
                }
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        return strings;
    }

    private static String read(final Path source)
    {
        try
        {
            return Files.readString(source);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("the source of a class the command reaches: " + source, ex);
        }
    }
}
