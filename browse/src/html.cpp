#include "html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kforge/common/strings.h"

namespace kforge::browse {

std::string escape(const std::string& text) {
  std::string shown = printable(text), out;
  out.reserve(shown.size());
  for (char c : shown) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string url_encode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape(title) +
         " - kforge</title>\n<style>\n"
         "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}nav a{margin-right:1em}"
         "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
         "td.n{text-align:right;font-variant-numeric:tabular-nums}pre{background:#f6f6f6;padding:.8em;overflow:auto}"
         "ins{background:#e6ffec;text-decoration:none}del{background:#ffebe9;text-decoration:none}.correct{color:#176917}.bad{color:#a31515}svg{background:#fff;border:1px solid #ddd}\n"
         "</style></head><body>\n<nav><a href=\"/\">runs</a><a href=\"/leaderboard\">leaderboard</a>"
         "<a href=\"/tasks\">tasks</a><form action=\"/search\" style=\"display:inline\"><input name=\"q\" "
         "placeholder=\"search kernels\"></form></nav>\n<h1>" + escape(title) + "</h1>\n" + body + "\n</body></html>\n";
}

std::string ratio(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", *v);
  return buf;
}

std::string millis(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f ms", *v);
  return buf;
}

std::string svg_plot(const std::string& title, const std::string& x_label, const std::string& y_label,
                     const std::vector<Series>& series) {
  const double W = 560, H = 300, L = 60, R = 20, T = 30, B = 45;
  double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
  for (const Series& s : series)
    for (auto [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y1 = std::max(y1, y), y0 = std::min(y0, y);
    }
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"560\" height=\"300\" role=\"img\" aria-label=\"" +
                    escape(title) + "\"><text x=\"" + std::to_string(int(L)) + "\" y=\"18\" font-size=\"14\">" + escape(title) + "</text>";
  if (!(x1 >= x0) || !(y1 > y0)) return out + "<text x=\"60\" y=\"150\">no data</text></svg>";
  if (x1 == x0) x1 = x0 + 1;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/><line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/>",
                L, H - B, W - R, H - B, L, T, L, H - B);
  out += buf;
  for (double f : {0.0, 0.5, 1.0}) {
    std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">%.3g</text>", L - 4,
                  py(y0 + f * (y1 - y0)) + 4, y0 + f * (y1 - y0));
    out += buf;
    std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"middle\">%.3g</text>",
                  px(x0 + f * (x1 - x0)), H - B + 15, x0 + f * (x1 - x0));
    out += buf;
  }
  out += "<text x=\"" + std::to_string(int((L + W - R) / 2)) + "\" y=\"" + std::to_string(int(H - 8)) +
         "\" font-size=\"12\" text-anchor=\"middle\">" + escape(x_label) + "</text><text x=\"14\" y=\"" +
         std::to_string(int((T + H - B) / 2)) + "\" font-size=\"12\" transform=\"rotate(-90 14 " +
         std::to_string(int((T + H - B) / 2)) + ")\" text-anchor=\"middle\">" + escape(y_label) + "</text>";
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  for (size_t i = 0; i < series.size(); ++i) {
    std::string points;
    for (auto [x, y] : series[i].points) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(x), py(y));
      points += buf;
    }
    const char* colour = colours[i % 6];
    if (series[i].connect)
      out += std::string("<polyline class=\"series\" fill=\"none\" stroke-width=\"2\" stroke=\"") + colour + "\" points=\"" + points + "\"/>";
    for (auto [x, y] : series[i].points) {
      std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>", px(x), py(y), colour);
      out += buf;
    }
    std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" font-size=\"11\" fill=\"%s\">", W - R - 120, T + 14.0 * (i + 1), colour);
    out += buf + escape(series[i].name) + "</text>";
  }
  return out + "</svg>";
}

}  // namespace kforge::browse
