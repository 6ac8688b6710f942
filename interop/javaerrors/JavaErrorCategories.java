// JavaErrorCategories prints every error code kafka-clients names
// (org.apache.kafka.common.protocol.Errors.values()) as one tab-separated
// line: code, name, the simple name of the exception class, and the
// KIP-1050 categories that class falls in, judged by what it extends:
//
//   retriable                RetriableException
//   refresh-retriable        RefreshRetriableException (a RetriableException)
//   abortable                TransactionAbortableException
//   application-recoverable  ApplicationRecoverableException
//   invalid-configuration    InvalidConfigurationException
//   fatal                    none of the above
//
// NONE (code 0, no exception) is left out. The output is
// kerr/testdata/errors-kafka-clients-4.4.0.tsv; javaerrors_test.go runs this
// program and compares its output with that file.
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.ApplicationRecoverableException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.RefreshRetriableException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.TransactionAbortableException;
import org.apache.kafka.common.protocol.Errors;

public final class JavaErrorCategories {
    public static void main(String[] args) {
        StringBuilder out = new StringBuilder();
        out.append("# code\tname\texception\tcategories\n");
        for (Errors e : Errors.values()) {
            ApiException ex = e.exception();
            if (ex == null) {
                continue;
            }
            Class<?> c = ex.getClass();
            List<String> cats = new ArrayList<>();
            if (RetriableException.class.isAssignableFrom(c)) cats.add("retriable");
            if (RefreshRetriableException.class.isAssignableFrom(c)) cats.add("refresh-retriable");
            if (TransactionAbortableException.class.isAssignableFrom(c)) cats.add("abortable");
            if (ApplicationRecoverableException.class.isAssignableFrom(c)) cats.add("application-recoverable");
            if (InvalidConfigurationException.class.isAssignableFrom(c)) cats.add("invalid-configuration");
            if (cats.isEmpty()) cats.add("fatal");
            out.append(e.code()).append('\t').append(e.name()).append('\t')
               .append(c.getSimpleName()).append('\t').append(String.join(",", cats)).append('\n');
        }
        System.out.print(out);
    }
}
