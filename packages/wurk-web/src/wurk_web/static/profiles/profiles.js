// The Profiles pages are drawn on the server; this shows their times in the
// viewer's own time zone and makes the Delete buttons work. The buttons are
// only drawn when the dashboard accepts changes; each deletion is a JSON POST,
// which the server accepts from this origin only.
"use strict";

function localTimes(root) {
  for (const node of root.querySelectorAll("time[datetime]")) {
    const date = new Date(node.getAttribute("datetime"));
    if (!Number.isNaN(date.getTime())) {
      node.title = node.textContent;
      node.textContent = date.toLocaleString();
    }
  }
}

async function deleteProfile(button) {
  const key = button.dataset.deleteProfile;
  if (!window.confirm(`Delete the profile ${key}?`)) return;
  const response = await fetch("api/profiles/delete", {
    method: "POST",
    credentials: "same-origin",
    headers: { Accept: "application/json", "Content-Type": "application/json" },
    body: JSON.stringify({ keys: [key] }),
  });
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    throw new Error(data.error || response.statusText);
  }
  button.closest("tr").remove();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const root of document.querySelectorAll(".profiles")) {
    localTimes(root);
    root.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-delete-profile]");
      if (!button) return;
      deleteProfile(button).catch((error) => {
        const note = document.createElement("p");
        note.className = "notice error";
        note.setAttribute("role", "alert");
        note.textContent = error.message;
        root.prepend(note);
      });
    });
    root.setAttribute("data-ready", "1");
  }
});
