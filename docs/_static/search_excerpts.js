// Sphinx builds a search result's excerpt from the page's [role="main"] element. In the
// book theme that element also holds the article header (download menu, theme switcher),
// so excerpts began "System Settings Light Dark". Take the article body instead.
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || !Search.htmlToText) return;
  const original = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    const article = page.querySelector("article.bd-article");
    if (!article) return original(htmlString, anchor);
    page.querySelectorAll('[role="main"]').forEach((el) => el.removeAttribute("role"));
    article.setAttribute("role", "main");
    return original(page.documentElement.outerHTML, anchor);
  };
});
