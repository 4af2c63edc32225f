// Apache Iceberg's REST catalog on 127.0.0.1 only (Iceberg's RESTCatalogServer binds every
// interface). Run with the jars of pom.xml: java -cp '<libs>/*' LoopbackRestCatalog.java PORT key=value...
// The key=value pairs are the backend catalog's properties (catalog-impl, uri, warehouse, ...).
import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class LoopbackRestCatalog {
  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    Map<String, String> props = new HashMap<>();
    for (int i = 1; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", props, new Configuration());
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    Server http = new Server(new InetSocketAddress("127.0.0.1", port));
    http.setHandler(context);
    http.start();
    System.out.println("Iceberg REST catalog listening on 127.0.0.1:" + port);
    http.join();
  }
}
