package io.mrd.cli;

import io.mrd.layout.MrdException;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.DaemonSetting;
import io.mrd.primary.DaemonSettings;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;
import java.util.function.Function;

/**
 * {@code mrd start}'s options for the daemon's settings, made from the rows of {@link DaemonSettings} when picocli
 * builds the command: one option a row that has one, with the row's parameter, help (its default written in),
 * visibility and parser, and the footer that says which variables stand for them. After parsing,
 * {@link #given} hands the options given, and only those, to a {@link DaemonContext}: what picocli was not given
 * stays unset, so that the variable fills it.
 * <p>
 * {@code --dir} is {@link DirOption}'s, which every command shares; its value is the {@code DIR} row's all the
 * same, and its help the same text.
 */
final class SettingOptions implements CommandLine.IModelTransformer
{
    /** Splits a list's option as its variable is split, so that the option takes the variable's text too. */
    private static final String LIST_SEPARATOR = "\\s*,\\s*";

    public CommandSpec transform(final CommandSpec spec)
    {
        for (final DaemonSetting<?> setting : DaemonSettings.all())
        {
            if (null != setting.option() && null == spec.findOption(setting.option()))
            {
                spec.addOption(option(setting));
            }
        }
        final List<String> footer = new ArrayList<>(List.of("", variables(spec)));
        footer.addAll(List.of(spec.usageMessage().footer()));
        spec.usageMessage().footer(footer.toArray(String[]::new));
        return spec;
    }

    /**
     * @return the option of {@code setting}, whose value is the row's: picocli converts the text with the row's
     * parser, and a text that is none is refused as picocli refuses any, naming the option.
     */
    static OptionSpec option(final DaemonSetting<?> setting)
    {
        final OptionSpec.Builder option = OptionSpec.builder(setting.option())
            .description(setting.help())
            .hidden(setting.hidden());
        if (setting.type().isFlag())
        {
            // --x and --no-x, as picocli makes any negatable boolean; the value it converts is true or false.
            return option.type(boolean.class).negatable(true).fallbackValue("true")
                .converters(converter(setting::parse)).build();
        }
        option.paramLabel(setting.paramLabel());
        if (null != setting.type().element())
        {
            return option.type(List.class).auxiliaryTypes(Object.class).splitRegex(LIST_SEPARATOR)
                .splitRegexSynopsisLabel(",").converters(converter(setting::parseElement)).build();
        }
        return option.type(Object.class).converters(converter(setting::parse)).build();
    }

    private static CommandLine.ITypeConverter<Object> converter(final Function<String, ?> parse)
    {
        return text ->
        {
            try
            {
                return parse.apply(text);
            }
            catch (final MrdException ex)
            {
                throw new CommandLine.TypeConversionException(ex.getMessage());
            }
        };
    }

    /**
     * Sets in {@code context} every setting whose option the command line gave.
     *
     * @return {@code context}.
     */
    static DaemonContext given(final CommandLine.ParseResult parsed, final DaemonContext context)
    {
        for (final DaemonSetting<?> setting : DaemonSettings.all())
        {
            if (null != setting.option() && parsed.hasMatchedOption(setting.option()))
            {
                give(context, setting, parsed.matchedOption(setting.option()).getValue());
            }
        }
        return context;
    }

    private static <T> void give(final DaemonContext context, final DaemonSetting<T> setting, final Object value)
    {
        // The option's converter is the row's parser (for --dir DirOption's, a Path as the row's), so its value,
        // or for a list the list of its elements, is a T.
        @SuppressWarnings("unchecked")
        final T typed = (T)value;
        context.set(setting, typed);
    }

    /**
     * @return the paragraph that says which options are settings, the variable of each and what is read from a
     * variable alone.
     */
    private static String variables(final CommandSpec spec)
    {
        final List<String> others = new ArrayList<>();
        for (final OptionSpec option : spec.options())
        {
            if (!option.usageHelp() && !option.versionHelp() && DaemonSettings.all().stream()
                .noneMatch(setting -> option.longestName().equals(setting.option())))
            {
                others.add(option.longestName());
            }
        }
        final StringJoiner irregular = new StringJoiner(", ");
        final StringJoiner variableOnly = new StringJoiner(" ");
        for (final DaemonSetting<?> setting : DaemonSettings.all())
        {
            if (null == setting.option())
            {
                variableOnly.add(setting.variable() + " " + setting.help());
            }
            else if (!setting.variableFollowsOption())
            {
                irregular.add(setting.variable() + " for " + setting.option());
            }
        }
        return "Every option but " + and(others) + " can also be given by a variable: MRD_ and the option's " +
            "name in capitals (MRD_MAX_MEMORY=4GiB is --max-memory 4GiB, MRD_ALLOW_GID=100,200 two --allow-gid)" +
            (0 == irregular.length() ? "" : ", but " + irregular) + ". An option on the command line beats its " +
            "variable, even when it repeats the default." + (0 == variableOnly.length() ? "" : " " + variableOnly);
    }

    private static String and(final List<String> names)
    {
        return names.size() < 2 ? String.join("", names) :
            String.join(", ", names.subList(0, names.size() - 1)) + " and " + names.getLast();
    }
}
