#include "html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "kforge/common/strings.h"

namespace kforge::browse {

std::string escape(const std::string& text) {
  std::string shown = printable(text), out;
  out.reserve(shown.size());
  for (char c : shown) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
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

std::string page(const std::string& title, const std::string& body, int refresh_s) {
  std::string refresh =
      refresh_s > 0 ? "<meta http-equiv=\"refresh\" content=\"" + std::to_string(refresh_s) + "\">"
                    : "";
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">" + refresh + "<title>" +
         escape(title) +
         " - kforge</title>\n<style>\n"
         "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}nav a{margin-right:1em}"
         "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em "
         ".5em;text-align:left}"
         "td.n{text-align:right;font-variant-numeric:tabular-nums}pre{background:#f6f6f6;padding:."
         "8em;overflow:auto}"
         "ins{background:#e6ffec;text-decoration:none}del{background:#ffebe9;text-decoration:none}."
         "correct{color:#176917}.bad{color:#a31515}svg{background:#fff;border:1px solid #ddd}"
         ".c{color:#6a737d}.s{color:#032f62}.p{color:#6f42c1}.n{color:#005cc5}.k{color:#d73a49}.q{"
         "color:#e36209}"
         "ul.tree{list-style:none;padding-left:1.2em;border-left:1px dotted "
         "#bbb}.here{font-weight:bold}\n"
         "</style></head><body>\n<nav><a href=\"/\">runs</a><a "
         "href=\"/leaderboard\">leaderboard</a>"
         "<a href=\"/tasks\">tasks</a><form action=\"/search\" style=\"display:inline\"><input "
         "name=\"q\" "
         "placeholder=\"search kernels\"></form></nav>\n<h1>" +
         escape(title) + "</h1>\n" + body + "\n</body></html>\n";
}

std::string highlight_cuda(const std::string& src) {
  static const std::set<std::string> keywords = {"auto",
                                                 "bool",
                                                 "break",
                                                 "case",
                                                 "char",
                                                 "const",
                                                 "constexpr",
                                                 "continue",
                                                 "default",
                                                 "do",
                                                 "double",
                                                 "else",
                                                 "enum",
                                                 "extern",
                                                 "false",
                                                 "float",
                                                 "for",
                                                 "goto",
                                                 "if",
                                                 "inline",
                                                 "int",
                                                 "long",
                                                 "namespace",
                                                 "nullptr",
                                                 "return",
                                                 "short",
                                                 "signed",
                                                 "sizeof",
                                                 "static",
                                                 "static_assert",
                                                 "struct",
                                                 "switch",
                                                 "template",
                                                 "true",
                                                 "typedef",
                                                 "typename",
                                                 "union",
                                                 "unsigned",
                                                 "using",
                                                 "void",
                                                 "volatile",
                                                 "while",
                                                 "half",
                                                 "size_t",
                                                 "class",
                                                 "static_cast",
                                                 "reinterpret_cast",
                                                 "const_cast",
                                                 "operator",
                                                 "this",
                                                 "asm",
                                                 "noexcept",
                                                 "decltype",
                                                 "int64_t",
                                                 "int32_t",
                                                 "uint32_t",
                                                 "uint64_t",
                                                 "float2",
                                                 "float4",
                                                 "int4",
                                                 "__half",
                                                 "__half2",
                                                 "__nv_bfloat16"};
  static const std::set<std::string> qualifiers = {
      "__global__",   "__device__",        "__host__",        "__shared__",        "__constant__",
      "__restrict__", "__forceinline__",   "__noinline__",    "__launch_bounds__", "__syncthreads",
      "__syncwarp",   "__grid_constant__", "__cluster_dims__"};
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  auto span = [](const char* cls, const std::string& text) {
    return std::string("<span class=\"") + cls + "\">" + escape(text) + "</span>";
  };
  std::string out;
  size_t i = 0;
  bool line_start = true;
  while (i < src.size()) {
    char c = src[i];
    size_t end = i + 1;
    if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
      end = src.find('\n', i);
      out += span("c", src.substr(i, (end == std::string::npos ? src.size() : end) - i));
    } else if (c == '/' && i + 1 < src.size() && src[i + 1] == '*') {
      end = src.find("*/", i + 2);
      end = end == std::string::npos ? src.size() : end + 2;
      out += span("c", src.substr(i, end - i));
    } else if (c == '"' || c == '\'') {
      while (end < src.size() && src[end] != c && src[end] != '\n') end += src[end] == '\\' ? 2 : 1;
      end = std::min(src.size(), end + 1);
      out += span("s", src.substr(i, end - i));
    } else if (c == '#' && line_start) {
      end = src.find('\n', i);  // a whole directive line (continuations aside)
      out += span("p", src.substr(i, (end == std::string::npos ? src.size() : end) - i));
    } else if (std::isdigit(static_cast<unsigned char>(c)) && (i == 0 || !word_char(src[i - 1]))) {
      while (end < src.size() && (word_char(src[end]) || src[end] == '.')) ++end;
      out += span("n", src.substr(i, end - i));
    } else if (word_char(c)) {
      while (end < src.size() && word_char(src[end])) ++end;
      std::string w = src.substr(i, end - i);
      out += keywords.count(w) ? span("k", w) : qualifiers.count(w) ? span("q", w) : escape(w);
    } else {  // operators, spaces and any other bytes, up to the next token (a UTF-8 sequence stays
              // whole)
      auto starts_token = [&](char d) {
        return word_char(d) || d == '"' || d == '\'' || d == '/' || d == '#';
      };
      while (end < src.size() && !starts_token(src[end])) ++end;
      out += escape(src.substr(i, end - i));
    }
    if (end == std::string::npos) end = src.size();
    for (size_t k = i; k < end; ++k)
      if (src[k] == '\n')
        line_start = true;
      else if (!std::isspace(static_cast<unsigned char>(src[k])))
        line_start = false;
    i = end;
  }
  return out;
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

std::string svg_plot(const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<Series>& series) {
  const double W = 560, H = 300, L = 60, R = 20, T = 30, B = 45;
  double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
  for (const Series& s : series)
    for (auto [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y1 = std::max(y1, y), y0 = std::min(y0, y);
    }
  std::string out =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"560\" height=\"300\" role=\"img\" "
      "aria-label=\"" +
      escape(title) + "\"><text x=\"" + std::to_string(int(L)) + "\" y=\"18\" font-size=\"14\">" +
      escape(title) + "</text>";
  if (!(x1 >= x0) || !(y1 > y0)) return out + "<text x=\"60\" y=\"150\">no data</text></svg>";
  if (x1 == x0) x1 = x0 + 1;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/><line x1=\"%g\" "
                "y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/>",
                L, H - B, W - R, H - B, L, T, L, H - B);
  out += buf;
  for (double f : {0.0, 0.5, 1.0}) {
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">%.3g</text>", L - 4,
                  py(y0 + f * (y1 - y0)) + 4, y0 + f * (y1 - y0));
    out += buf;
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"middle\">%.3g</text>",
                  px(x0 + f * (x1 - x0)), H - B + 15, x0 + f * (x1 - x0));
    out += buf;
  }
  out += "<text x=\"" + std::to_string(int((L + W - R) / 2)) + "\" y=\"" +
         std::to_string(int(H - 8)) + "\" font-size=\"12\" text-anchor=\"middle\">" +
         escape(x_label) + "</text><text x=\"14\" y=\"" + std::to_string(int((T + H - B) / 2)) +
         "\" font-size=\"12\" transform=\"rotate(-90 14 " + std::to_string(int((T + H - B) / 2)) +
         ")\" text-anchor=\"middle\">" + escape(y_label) + "</text>";
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  for (size_t i = 0; i < series.size(); ++i) {
    std::string points;
    for (auto [x, y] : series[i].points) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(x), py(y));
      points += buf;
    }
    const char* colour = colours[i % 6];
    if (series[i].connect)
      out += std::string("<polyline class=\"series\" fill=\"none\" stroke-width=\"2\" stroke=\"") +
             colour + "\" points=\"" + points + "\"/>";
    for (auto [x, y] : series[i].points) {
      std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>", px(x),
                    py(y), colour);
      out += buf;
    }
    std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" font-size=\"11\" fill=\"%s\">",
                  W - R - 120, T + 14.0 * (i + 1), colour);
    out += buf + escape(series[i].name) + "</text>";
  }
  return out + "</svg>";
}

}  // namespace kforge::browse
