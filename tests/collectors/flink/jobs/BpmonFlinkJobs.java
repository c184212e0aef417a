/*
 * Small Flink jobs with a controlled bottleneck, for bpmon's tests against a real cluster.
 *
 * Usage: BpmonFlinkJobs TOPOLOGY   (slow-map, hot-key, slow-sink, healthy, fan-in)
 *
 * slow-map:  numbers (4000/s) -> enrich (1 ms per record, 2 subtasks) -> sink
 * hot-key:   numbers (3000/s) -> keyBy (2/3 of records on one key) -> count (1.5 ms, 2) -> sink
 * slow-sink: numbers (1000/s) -> light (40 KB records) -> store (2 ms per record)
 * healthy:   numbers (200/s) -> enrich (0.2 ms, 2) -> sink
 * fan-in:    left + right (1500/s each) -> merge (0.5 ms) -> sink
 *
 * Every job reads a rate-limited FLIP-27 generator source. Costs are paid by sleeping (a thread
 * that sleeps is busy for Flink's time accounting and for a stack sample, and leaves the shared
 * CPU to others). A parse map is chained to the source so a chained vertex is always present;
 * every other operator starts its own task (disableChaining), named as bpmon's tests expect.
 */

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class BpmonFlinkJobs {

    /** Sleeps ``micros`` per record on average (one sleep per millisecond of debt). */
    static final class Cost implements java.io.Serializable {
        private final long micros;
        private long debt;

        Cost(long micros) {
            this.micros = micros;
        }

        void pay() throws InterruptedException {
            debt += micros;
            if (debt >= 1000) {
                Thread.sleep(debt / 1000);
                debt %= 1000;
            }
        }
    }

    /** A map that costs ``micros`` per record. */
    static final class SlowMap implements MapFunction<Long, Long> {
        private final Cost cost;

        SlowMap(long micros) {
            this.cost = new Cost(micros);
        }

        @Override
        public Long map(Long value) throws Exception {
            cost.pay();
            return value;
        }
    }

    /** A sink that costs ``micros`` per record: an external system that keeps up slowly. */
    static final class SlowSink<T> implements Sink<T> {
        private final long micros;

        SlowSink(long micros) {
            this.micros = micros;
        }

        @Override
        public SinkWriter<T> createWriter(WriterInitContext context) {
            Cost cost = new Cost(micros);
            return new SinkWriter<T>() {
                @Override
                public void write(T element, Context ctx) throws InterruptedException {
                    cost.pay();
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }

    static DataStream<Long> source(StreamExecutionEnvironment env, String name, double rate) {
        DataGeneratorSource<Long> gen =
                new DataGeneratorSource<>(
                        index -> index, Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate), Types.LONG);
        return env.fromSource(gen, WatermarkStrategy.noWatermarks(), name)
                .map(new SlowMap(0))
                .name("parse");
    }

    public static void main(String[] args) throws Exception {
        String topology = args.length > 0 ? args[0] : "slow-map";
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        switch (topology) {
            case "slow-map":
                source(env, "numbers", 4000)
                        .map(new SlowMap(1000)).name("enrich").setParallelism(2).disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "hot-key":
                source(env, "numbers", 3000)
                        // 2/3 of the records on key 0; the rest over 334 keys, about half
                        // of them on each subtask (34 keys left one subtask nearly idle)
                        .keyBy(v -> v % 3 != 0 ? 0L : v % 1000)
                        .map(new SlowMap(1500)).name("count").setParallelism(2).disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "slow-sink":
                // 40 KB records span two 32 KB network buffers: the writer of "light" also
                // blocks inside a record (hard backpressure), not only between records.
                source(env, "numbers", 1000)
                        .map(v -> new byte[40_000]).returns(byte[].class).name("light")
                        .disableChaining()
                        .sinkTo(new SlowSink<byte[]>(2000)).name("store").disableChaining();
                break;
            case "healthy":
                source(env, "numbers", 200)
                        .map(new SlowMap(200)).name("enrich").setParallelism(2).disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "fan-in":
                source(env, "left", 1500)
                        .union(source(env, "right", 1500))
                        .map(new SlowMap(500)).name("merge").disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            default:
                throw new IllegalArgumentException("unknown topology " + topology);
        }
        env.execute("bpmon-" + topology);
    }
}
