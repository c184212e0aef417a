/*
 * Flink SQL jobs with a controlled bottleneck, for bpmon's tests against a real cluster: the
 * vertices are named by the planner, the operators are generated classes, the source is SQL's
 * datagen connector, as a team writes them.
 *
 * Usage: BpmonSqlJobs TOPOLOGY   (sql-slow-udf, sql-skew, sql-slow-sink)
 *
 * sql-slow-udf:  orders (datagen, 3000/s, 1 subtask) -> Calc with score(amount), a scalar UDF of
 *                1 ms a record, chained with the blackhole sink (2 subtasks): the UDF inside a chain
 * sql-skew:      clicks (datagen, 2000/s, 1) -> Calc (2/3 of the rows on key 0) -> GroupAggregate
 *                (slow_count, 1 ms a row, 2 subtasks) -> blackhole: a skewed GROUP BY
 * sql-slow-sink: orders (datagen, 1000/s, 1) -> Calc -> a sink writing each row to a slow
 *                external system (3 ms a row, 2 subtasks; the bpmon-slow connector below)
 *
 * Each INSERT is submitted and main returns (the REST run request does not wait for the job).
 */

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.sink.SinkV2Provider;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DynamicTableSinkFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.functions.AggregateFunction;
import org.apache.flink.table.functions.ScalarFunction;

import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.Set;

public class BpmonSqlJobs {

    /** A scoring UDF that costs 1 ms a row (a model, a remote lookup). */
    public static final class Score extends ScalarFunction {
        private final BpmonFlinkJobs.Cost cost = new BpmonFlinkJobs.Cost(1000);

        public long eval(Integer amount) {
            pay(cost);
            return amount == null ? 0 : amount * 7L;
        }
    }

    /** COUNT(*) that costs 1 ms a row: an aggregate with real work per row. */
    public static final class SlowCount extends AggregateFunction<Long, SlowCount.Acc> {
        private final BpmonFlinkJobs.Cost cost = new BpmonFlinkJobs.Cost(1000);

        /** The accumulator: the rows counted. */
        public static final class Acc {
            public long n;
        }

        @Override
        public Acc createAccumulator() {
            return new Acc();
        }

        @Override
        public Long getValue(Acc acc) {
            return acc.n;
        }

        public void accumulate(Acc acc, Long value) {
            pay(cost);
            acc.n++;
        }
    }

    static void pay(BpmonFlinkJobs.Cost cost) {
        try {
            cost.pay();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The bpmon-slow connector: a sink that writes each row to a slow system (micros a row). */
    public static final class SlowSinkFactory implements DynamicTableSinkFactory {
        static final ConfigOption<Integer> MICROS =
                ConfigOptions.key("micros").intType().defaultValue(2000);

        @Override
        public String factoryIdentifier() {
            return "bpmon-slow";
        }

        @Override
        public Set<ConfigOption<?>> requiredOptions() {
            return Collections.emptySet();
        }

        @Override
        public Set<ConfigOption<?>> optionalOptions() {
            return new HashSet<>(Arrays.asList(MICROS, FactoryUtil.SINK_PARALLELISM));
        }

        @Override
        public DynamicTableSink createDynamicTableSink(Context context) {
            FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
            helper.validate();
            ReadableConfig options = helper.getOptions();
            return new SlowTableSink(
                    options.get(MICROS), options.getOptional(FactoryUtil.SINK_PARALLELISM).orElse(null));
        }
    }

    static final class SlowTableSink implements DynamicTableSink {
        private final int micros;
        private final Integer parallelism;

        SlowTableSink(int micros, Integer parallelism) {
            this.micros = micros;
            this.parallelism = parallelism;
        }

        @Override
        public ChangelogMode getChangelogMode(ChangelogMode requested) {
            return requested;
        }

        @Override
        public SinkRuntimeProvider getSinkRuntimeProvider(Context context) {
            return SinkV2Provider.of(new BpmonFlinkJobs.SlowSink<RowData>(micros), parallelism);
        }

        @Override
        public DynamicTableSink copy() {
            return new SlowTableSink(micros, parallelism);
        }

        @Override
        public String asSummaryString() {
            return "bpmon-slow";
        }
    }

    static String datagen(String table, String columns, int rate, String fields) {
        return "CREATE TABLE " + table + " (" + columns + ") WITH ('connector' = 'datagen', "
                + "'rows-per-second' = '" + rate + "', 'scan.parallelism' = '1'" + fields + ")";
    }

    public static void main(String[] args) {
        String topology = args.length > 0 ? args[0] : "sql-slow-udf";
        TableEnvironment t = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        t.getConfig().set("table.exec.resource.default-parallelism", "2");
        t.getConfig().set("pipeline.name", "bpmon-" + topology);
        t.createTemporarySystemFunction("score", Score.class);
        t.createTemporarySystemFunction("slow_count", SlowCount.class);
        String amount = ", 'fields.amount.min' = '1', 'fields.amount.max' = '1000'";
        switch (topology) {
            case "sql-slow-udf":
                t.executeSql(datagen("orders", "id BIGINT, amount INT", 3000, amount));
                t.executeSql("CREATE TABLE enriched (id BIGINT, score BIGINT) "
                        + "WITH ('connector' = 'blackhole')");
                t.executeSql("INSERT INTO enriched SELECT id, score(amount) FROM orders");
                break;
            case "sql-skew":
                t.executeSql(datagen("clicks", "user_id INT, v BIGINT", 2000,
                        ", 'fields.user_id.min' = '1', 'fields.user_id.max' = '999'"));
                t.executeSql("CREATE TABLE per_user (user_id INT, clicks BIGINT) "
                        + "WITH ('connector' = 'blackhole')");
                t.executeSql("INSERT INTO per_user SELECT k, slow_count(v) FROM ("
                        + "SELECT CASE WHEN MOD(ABS(v), 3) <> 0 THEN 0 ELSE user_id END AS k, v "
                        + "FROM clicks) GROUP BY k");
                break;
            case "sql-slow-sink":
                t.executeSql(datagen("orders", "id BIGINT, amount INT", 1000, amount));
                t.executeSql("CREATE TABLE archive (id BIGINT, amount INT) WITH ("
                        + "'connector' = 'bpmon-slow', 'micros' = '3000', 'sink.parallelism' = '2')");
                t.executeSql("INSERT INTO archive SELECT id, amount FROM orders WHERE amount > 0");
                break;
            default:
                throw new IllegalArgumentException("unknown topology " + topology);
        }
    }
}
